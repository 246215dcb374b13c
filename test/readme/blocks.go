package readme

import (
	"bufio"
	"bytes"
	"fmt"
	"regexp"
	"strings"
)

// Block is a fenced sh block of a Markdown section.
type Block struct {
	// Line is the line of the opening fence, from 1.
	Line int
	// Only is the marker before the fence: "root", "user", "first", or
	// empty.
	Only string
	// Text is the block's content.
	Text string
}

// For returns the text of b to run as role ("root" or "user"): empty when
// b is for the other role, only its first command when b is marked first.
func (b Block) For(role string) string {
	switch b.Only {
	case "", "first":
	default:
		if b.Only != role {
			return ""
		}
	}
	if b.Only == "first" {
		return FirstCommand(b.Text)
	}
	return b.Text
}

// markerRE matches a block's marker comment.
var markerRE = regexp.MustCompile(`^<!--\s*readme-test:\s*(\S+)`)

// Blocks returns the sh blocks of the section of md whose heading is
// heading (any level), up to the next heading of the same level or
// higher. It fails when the section is missing or has none, and on an
// unknown marker.
func Blocks(md []byte, heading string) ([]Block, error) {
	var (
		blocks  []Block
		level   int // of the section's heading; 0 before it
		inFence bool
		cur     *Block
		marker  string // of the block about to start
		body    strings.Builder
	)
	sc := bufio.NewScanner(bytes.NewReader(md))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if inFence {
			if strings.TrimSpace(line) == "```" {
				inFence = false
				if cur != nil {
					cur.Text = body.String()
					blocks = append(blocks, *cur)
					cur = nil
				}
				continue
			}
			body.WriteString(line + "\n")
			continue
		}
		if strings.HasPrefix(line, "```") {
			inFence = true
			body.Reset()
			if level > 0 && strings.TrimSpace(strings.TrimPrefix(line, "```")) == "sh" {
				cur = &Block{Line: n, Only: marker}
			}
			marker = ""
			continue
		}
		if h := headingLevel(line); h > 0 {
			title := strings.TrimSpace(line[h:])
			switch {
			case level == 0 && title == heading:
				level = h
			case level > 0 && h <= level:
				return check(blocks, heading)
			}
			continue
		}
		if level == 0 {
			continue
		}
		if m := markerRE.FindStringSubmatch(line); m != nil {
			switch m[1] {
			case "root", "user", "first":
				marker = m[1]
			default:
				return nil, fmt.Errorf("line %d: unknown marker %q (want root, user or first)", n, m[1])
			}
		} else if strings.TrimSpace(line) != "" {
			marker = "" // a marker belongs to the block right after it
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if level == 0 {
		return nil, fmt.Errorf("no section %q", heading)
	}
	return check(blocks, heading)
}

func check(blocks []Block, heading string) ([]Block, error) {
	if len(blocks) == 0 {
		return nil, fmt.Errorf("section %q has no sh block", heading)
	}
	return blocks, nil
}

// headingLevel returns the level of a Markdown ATX heading line, or 0.
func headingLevel(line string) int {
	n := len(line) - len(strings.TrimLeft(line, "#"))
	if n == 0 || n > 6 || len(line) == n || line[n] != ' ' {
		return 0
	}
	return n
}

// FirstCommand returns the first command of a script: its first line that
// is not blank or a comment, with the lines it continues onto (a trailing
// backslash or pipe).
func FirstCommand(script string) string {
	var b strings.Builder
	started := false
	for _, line := range strings.Split(script, "\n") {
		t := strings.TrimSpace(line)
		if !started && (t == "" || strings.HasPrefix(t, "#")) {
			continue
		}
		started = true
		b.WriteString(line + "\n")
		if !strings.HasSuffix(t, "\\") && !strings.HasSuffix(t, "|") {
			break
		}
	}
	return b.String()
}

// Script joins the blocks to run as role into one script.
func Script(blocks []Block, role string) string {
	var b strings.Builder
	for _, bl := range blocks {
		if text := bl.For(role); text != "" {
			fmt.Fprintf(&b, "# block at line %d\n%s", bl.Line, text)
		}
	}
	return b.String()
}
