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
	var out []*string
	if body == "" {
		return out, nil
	}
	for i := 0; i <= len(body); {
		if i < len(body) && body[i] == '{' {
			return nil, fmt.Errorf("compute: multidimensional arrays are not supported")
		}
		var b strings.Builder
		quoted := i < len(body) && body[i] == '"'
		if quoted {
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
		} else {
			for ; i < len(body) && body[i] != ','; i++ {
				b.WriteByte(body[i])
			}
		}
		e := b.String()
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
