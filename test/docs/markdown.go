// Package docs checks the user documentation (README.md, docs/, the
// commands' READMEs) as a reader meets it: tables that fit a screen, no
// references to the project's issue tracker or commits outside docs/notes/,
// relative links that resolve, and the package map that matches the code.
// Its helpers read fenced blocks out of markdown for the tests elsewhere
// that run what the README shows (the CRD dry run of its YAML).
package docs

import (
	"bufio"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// Block is one fenced code block of a markdown file.
type Block struct {
	// Lang is the fence's info string (```yaml → "yaml").
	Lang string
	// Line is the 1-based line of the opening fence.
	Line int
	// Text is the block's content, fences excluded.
	Text string
}

// RepoRoot is the repository's root directory, found from this file's
// location so tests in any package can read the docs.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// FencedBlocks returns the fenced code blocks of a markdown file in order.
func FencedBlocks(path string) ([]Block, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var blocks []Block
	var cur *Block
	var fence string
	var b strings.Builder
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if cur == nil {
			if f := fenceOf(trimmed); f != "" {
				cur = &Block{Lang: strings.TrimSpace(trimmed[len(f):]), Line: n}
				fence = f
				b.Reset()
			}
			continue
		}
		if strings.HasPrefix(trimmed, fence) && strings.TrimLeft(trimmed, fence[:1]) == "" {
			cur.Text = b.String()
			blocks = append(blocks, *cur)
			cur = nil
			continue
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	return blocks, sc.Err()
}

// fenceOf returns the fence (``` or ~~~, three or more) a line opens with,
// or "".
func fenceOf(line string) string {
	for _, c := range []string{"`", "~"} {
		n := len(line) - len(strings.TrimLeft(line, c))
		if n >= 3 {
			return line[:n]
		}
	}
	return ""
}
