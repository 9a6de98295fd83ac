// OSC dispatch: title, palette (4, 104) and dynamic colours (10-12, 110-112), and its string helpers.

package pty

// --- OSC ---

func (e *emulator) oscDispatch() {
	if e.oscLong {
		return
	}
	s := string(e.osc)
	num, rest := 0, ""
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		num = num*10 + int(s[i]-'0')
		i++
		if num > 10000 {
			return
		}
	}
	if i == 0 {
		return
	}
	if i < len(s) {
		if s[i] != ';' {
			return
		}
		rest = s[i+1:]
	}
	switch num {
	case 0, 2:
		e.title = rest
	case 4:
		parts := splitSemi(rest)
		for k := 0; k+1 < len(parts); k += 2 {
			idx, ok := atoi(parts[k])
			if !ok || idx > 255 || parts[k+1] == "?" {
				continue
			}
			if e.palette == nil {
				e.palette = make(map[int]string)
			}
			e.palette[idx] = parts[k+1]
		}
	case 104:
		if rest == "" {
			e.palette = nil
			break
		}
		for _, p := range splitSemi(rest) {
			if idx, ok := atoi(p); ok {
				delete(e.palette, idx)
			}
		}
	case 10, 11, 12:
		for k, p := range splitSemi(rest) {
			if num-10+k > 2 {
				break
			}
			if p != "?" {
				e.dynamic[num-10+k] = p
			}
		}
	case 110, 111, 112:
		e.dynamic[num-110] = ""
	}
}

func splitSemi(s string) []string {
	var out []string
	for {
		i := 0
		for i < len(s) && s[i] != ';' {
			i++
		}
		out = append(out, s[:i])
		if i == len(s) {
			return out
		}
		s = s[i+1:]
	}
}

func atoi(s string) (int, bool) {
	if s == "" || len(s) > 6 {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, true
}
