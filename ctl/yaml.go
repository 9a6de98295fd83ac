package ctl

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// A small YAML emitter for -o yaml: the value is marshalled to JSON (so
// the field names and shapes are those of -o json) and the JSON is written
// as block-style YAML 1.2, keys in the JSON's order. Strings are quoted
// whenever a plain scalar would read as something else (a number, a bool,
// null, an indicator, a comment), so that YAML parsers give back exactly
// the JSON value.

// node is a parsed JSON value that keeps the order of object keys.
type node struct {
	kind   byte // 'o' object, 'a' array, 's' string, 'n' number, 'b' bool, 'z' null
	keys   []string
	vals   []*node
	scalar string
}

func toYAML(v any) ([]byte, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return jsonToYAML(data)
}

func jsonToYAML(data []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	n, err := parseNode(dec)
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	switch {
	case n.kind == 'o' && len(n.keys) > 0, n.kind == 'a' && len(n.vals) > 0:
		writeBlock(&b, n, 0)
	default:
		b.WriteString(inlineYAML(n))
		b.WriteByte('\n')
	}
	return []byte(b.String()), nil
}

func parseNode(dec *json.Decoder) (*node, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			n := &node{kind: 'o'}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, _ := kt.(string)
				v, err := parseNode(dec)
				if err != nil {
					return nil, err
				}
				n.keys, n.vals = append(n.keys, k), append(n.vals, v)
			}
			_, err := dec.Token() // }
			return n, err
		case '[':
			n := &node{kind: 'a'}
			for dec.More() {
				v, err := parseNode(dec)
				if err != nil {
					return nil, err
				}
				n.vals = append(n.vals, v)
			}
			_, err := dec.Token() // ]
			return n, err
		}
		return nil, fmt.Errorf("yaml: unexpected %v", t)
	case string:
		return &node{kind: 's', scalar: t}, nil
	case json.Number:
		return &node{kind: 'n', scalar: t.String()}, nil
	case bool:
		return &node{kind: 'b', scalar: strconv.FormatBool(t)}, nil
	case nil:
		return &node{kind: 'z', scalar: "null"}, nil
	}
	return nil, fmt.Errorf("yaml: unexpected token %v", tok)
}

// inlineYAML renders a scalar or an empty collection on one line.
func inlineYAML(n *node) string {
	switch n.kind {
	case 'o':
		return "{}"
	case 'a':
		return "[]"
	case 's':
		return yamlString(n.scalar)
	}
	return n.scalar
}

func isBlock(n *node) bool {
	return (n.kind == 'o' && len(n.keys) > 0) || (n.kind == 'a' && len(n.vals) > 0)
}

// writeBlock writes a non-empty object or array at indent.
func writeBlock(b *strings.Builder, n *node, indent int) {
	pad := strings.Repeat("  ", indent)
	if n.kind == 'o' {
		for i, k := range n.keys {
			v := n.vals[i]
			b.WriteString(pad + yamlString(k) + ":")
			if isBlock(v) {
				b.WriteByte('\n')
				// A list under a key is indented too (as most emitters do).
				writeBlock(b, v, indent+1)
				continue
			}
			b.WriteString(" " + inlineYAML(v) + "\n")
		}
		return
	}
	for _, v := range n.vals {
		if !isBlock(v) {
			b.WriteString(pad + "- " + inlineYAML(v) + "\n")
			continue
		}
		// "- " then the first line of the block on the same line, the
		// rest indented by one more level.
		var inner strings.Builder
		writeBlock(&inner, v, indent+1)
		s := inner.String()
		b.WriteString(pad + "- " + strings.TrimPrefix(s, pad+"  "))
	}
}

// yamlString writes s as a plain scalar when that reads back as the same
// string, else double-quoted with JSON escapes (valid YAML).
func yamlString(s string) string {
	if plainSafe(s) {
		return s
	}
	q, _ := json.Marshal(s)
	return string(q)
}

func plainSafe(s string) bool {
	if s == "" || strings.TrimSpace(s) != s {
		return false
	}
	switch strings.ToLower(s) {
	case "null", "~", "true", "false", "yes", "no", "on", "off", "y", "n", ".nan", ".inf", "-.inf", "+.inf":
		return false
	}
	// Anything that looks like a number (or a date, or a sexagesimal) is
	// quoted: a digit, sign or dot first is enough to be careful.
	switch s[0] {
	case '-', '?', ':', ',', '[', ']', '{', '}', '#', '&', '*', '!', '|', '>', '\'', '"', '%', '@', '`', '+', '.', '=', '<':
		return false
	}
	if s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c == 0x7f {
			return false
		}
	}
	return !strings.Contains(s, ": ") && !strings.Contains(s, " #") && !strings.HasSuffix(s, ":")
}
