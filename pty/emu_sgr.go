// SGR: the pen's colours and attributes.

package pty

// --- SGR ---

func (e *emulator) sgr() {
	if e.nparams == 0 {
		e.fg, e.bg = 0, 0
		return
	}
	for i := 0; i < e.nparams; i++ {
		p := e.params[i]
		if p < 0 {
			p = 0
		}
		switch {
		case p == 0:
			e.fg, e.bg = 0, 0
		case p == 1:
			e.fg |= aBold
		case p == 2:
			e.fg |= aDim
		case p == 3:
			e.fg |= aItalic
		case p == 4:
			style := uint32(1)
			if i+1 < e.nparams && e.sub[i+1] {
				i++
				style = uint32(max(0, e.params[i]))
				if style > 5 {
					style = 1
				}
			}
			e.bg = e.bg&^ulMask | style<<ulShift
		case p == 5 || p == 6:
			e.fg |= aBlink
		case p == 7:
			e.fg |= aInverse
		case p == 8:
			e.fg |= aHidden
		case p == 9:
			e.bg |= aStrike
		case p == 21:
			e.bg = e.bg&^ulMask | 2<<ulShift
		case p == 22:
			e.fg &^= aBold | aDim
		case p == 23:
			e.fg &^= aItalic
		case p == 24:
			e.bg &^= ulMask
		case p == 25:
			e.fg &^= aBlink
		case p == 27:
			e.fg &^= aInverse
		case p == 28:
			e.fg &^= aHidden
		case p == 29:
			e.bg &^= aStrike
		case p >= 30 && p <= 37:
			e.fg = e.fg&^(cmMask|colorMask) | cmIndexed | uint32(p-30)
		case p == 38, p == 48, p == 58:
			var c uint32
			var ok bool
			c, i, ok = e.extColor(i)
			if !ok || p == 58 {
				continue // underline colour is not modelled (doc.go)
			}
			if p == 38 {
				e.fg = e.fg&^(cmMask|colorMask) | c
			} else {
				e.bg = e.bg&^(cmMask|colorMask) | c
			}
		case p == 39:
			e.fg &^= cmMask | colorMask
		case p >= 40 && p <= 47:
			e.bg = e.bg&^(cmMask|colorMask) | cmIndexed | uint32(p-40)
		case p == 49:
			e.bg &^= cmMask | colorMask
		case p == 53:
			e.bg |= aOverline
		case p == 55:
			e.bg &^= aOverline
		case p >= 90 && p <= 97:
			e.fg = e.fg&^(cmMask|colorMask) | cmIndexed | uint32(p-90+8)
		case p >= 100 && p <= 107:
			e.bg = e.bg&^(cmMask|colorMask) | cmIndexed | uint32(p-100+8)
		}
	}
}

// extColor parses the colour after 38/48/58 at params[i], in the ';' form
// (38;5;n, 38;2;r;g;b) or the ':' form (38:5:n, 38:2:r:g:b, 38:2:cs:r:g:b).
// It returns the packed colour, the index of the last parameter consumed,
// and whether a colour was found.
func (e *emulator) extColor(i int) (uint32, int, bool) {
	if i+1 >= e.nparams {
		return 0, i, false
	}
	colon := e.sub[i+1]
	var vals [6]int32
	n := 0
	j := i + 1
	for ; j < e.nparams && n < len(vals); j++ {
		if colon && !e.sub[j] {
			break
		}
		vals[n] = e.params[j]
		n++
		if !colon {
			if vals[0] == 5 && n == 2 || vals[0] == 2 && n == 4 || vals[0] != 2 && vals[0] != 5 {
				j++
				break
			}
		}
	}
	last := j - 1
	switch vals[0] {
	case 5:
		if n < 2 || vals[1] < 0 || vals[1] > 255 {
			return 0, last, false
		}
		return cmIndexed | uint32(vals[1]), last, true
	case 2:
		var r, g, b int32
		switch {
		case n >= 5 && colon:
			r, g, b = vals[2], vals[3], vals[4]
		case n >= 4:
			r, g, b = vals[1], vals[2], vals[3]
		default:
			return 0, last, false
		}
		r, g, b = max(r, 0), max(g, 0), max(b, 0)
		return cmRGB | uint32(min(r, 255))<<16 | uint32(min(g, 255))<<8 | uint32(min(b, 255)), last, true
	}
	return 0, last, false
}
