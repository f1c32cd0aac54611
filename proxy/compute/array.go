// The text and binary forms of one-dimensional arrays, as array_out and
// array_send write them: how the server hands the proxy the values of a
// group (array_agg).

package compute

import (
	"encoding/binary"
	"fmt"
	"strings"
)

// ParseArray splits array_out's text of a one-dimensional array into its
// elements; nil elements are NULL.
func ParseArray(s string) ([]*string, error) {
	if i := strings.Index(s, "="); i >= 0 && strings.HasPrefix(s, "[") {
		s = s[i+1:] // explicit bounds: [0:2]={...}
	}
	if len(s) < 2 || s[0] != '{' || s[len(s)-1] != '}' {
		return nil, fmt.Errorf("compute: not an array: %.40q", s)
	}
	body := s[1 : len(s)-1]
	out := make([]*string, 0, strings.Count(body, ",")+1)
	if body == "" {
		return out, nil
	}
	for i := 0; i <= len(body); {
		if i < len(body) && body[i] == '{' {
			return nil, fmt.Errorf("compute: multidimensional arrays are not supported")
		}
		var e string
		quoted := i < len(body) && body[i] == '"'
		if quoted {
			var b strings.Builder
			i++
			for ; i < len(body) && body[i] != '"'; i++ {
				if body[i] == '\\' && i+1 < len(body) {
					i++
				}
				b.WriteByte(body[i])
			}
			if i >= len(body) {
				return nil, fmt.Errorf("compute: unterminated quoted array element")
			}
			i++
			e = b.String()
		} else {
			// the common case (base64, numbers): a substring, no copy
			j := strings.IndexByte(body[i:], ',')
			if j < 0 {
				j = len(body) - i
			}
			e = body[i : i+j]
			i += j
		}
		if !quoted && strings.EqualFold(e, "NULL") {
			out = append(out, nil)
		} else {
			out = append(out, &e)
		}
		if i < len(body) && body[i] != ',' {
			return nil, fmt.Errorf("compute: malformed array after element %d", len(out))
		}
		i++
	}
	return out, nil
}

// ParseBinaryArray splits array_send's binary form of a one-dimensional
// array (or of none: no dimensions) into its elements' bytes, which alias
// b; nil elements are NULL.  The proxy asks for it in the extended
// protocol, where a value of a group then costs no text parsing nor
// base64 (each element is the ciphertext itself, as enc_send writes it).
func ParseBinaryArray(b []byte) ([][]byte, error) {
	if len(b) < 12 {
		return nil, fmt.Errorf("compute: binary array of %d bytes", len(b))
	}
	ndim := int32(binary.BigEndian.Uint32(b))
	p := b[12:]
	switch {
	case ndim == 0:
		return [][]byte{}, nil
	case ndim != 1:
		return nil, fmt.Errorf("compute: binary array of %d dimensions: only one is supported", ndim)
	case len(p) < 8:
		return nil, fmt.Errorf("compute: binary array without its dimension")
	}
	n := int32(binary.BigEndian.Uint32(p))
	p = p[8:]
	// each element takes at least its 4-byte length: no allocation beyond
	// what the message holds
	if n < 0 || int64(n)*4 > int64(len(p)) {
		return nil, fmt.Errorf("compute: binary array of %d elements in %d bytes", n, len(p))
	}
	out := make([][]byte, n)
	for i := range out {
		if len(p) < 4 {
			return nil, fmt.Errorf("compute: binary array ends at element %d of %d", i, n)
		}
		l := int32(binary.BigEndian.Uint32(p))
		p = p[4:]
		if l == -1 {
			continue
		}
		if l < 0 || int(l) > len(p) {
			return nil, fmt.Errorf("compute: binary array element %d of %d bytes in %d", i, l, len(p))
		}
		out[i] = p[:l:l]
		p = p[l:]
	}
	if len(p) != 0 {
		return nil, fmt.Errorf("compute: %d bytes after the binary array's last element", len(p))
	}
	return out, nil
}
