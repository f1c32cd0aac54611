// The text form of one-dimensional arrays, as array_out writes them: how
// the server hands the proxy the values of a group (array_agg).

package compute

import (
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
