// Package doccheck holds the tests that keep the documentation honest and readable:
//
//   - TestDocCodeComesFromExamples: every Go code block in README.md and in the package
//     documentation (doc.go) of every package comes from a compiled example, so the docs
//     cannot drift from the API.
//   - TestCommentStyle: no comment line past column 100, no long doc comment without a
//     list (style_test.go).
//   - TestDocStats prints the doc-comment metrics of issue 23 (stats_test.go).
//
// A code block matches when its lines, with leading whitespace and blank lines dropped,
// appear contiguously in the body of some Example function in a _test.go file of the
// repository; an elision line ("..." or "// ...") splits a block into parts that must
// appear in that order in the same body. Blocks that are not Go (a shell command, a table)
// are not checked: a block is Go when it parses as statements or as declarations once its
// elisions are removed.
package doccheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// repoRoot is the repository root, two levels above this package.
const repoRoot = "../.."

// isElision reports whether a trimmed line stands for omitted code.
func isElision(l string) bool { return l == "..." || l == "// ..." }

// normalize drops indentation, blank lines and elision lines.
func normalize(lines []string) []string {
	var out []string
	for _, l := range lines {
		l = strings.TrimSpace(l)
		if l == "" || isElision(l) {
			continue
		}
		out = append(out, l)
	}
	return out
}

// parts splits a block at its elisions into normalized parts.
func parts(lines []string) [][]string {
	var out [][]string
	var cur []string
	for _, l := range lines {
		if isElision(strings.TrimSpace(l)) {
			if n := normalize(cur); len(n) > 0 {
				out = append(out, n)
			}
			cur = nil
			continue
		}
		cur = append(cur, l)
	}
	if n := normalize(cur); len(n) > 0 {
		out = append(out, n)
	}
	return out
}

// isGo reports whether the block, elisions removed, parses as Go statements or
// declarations.
func isGo(lines []string) bool {
	var kept []string
	for _, l := range lines {
		if !isElision(strings.TrimSpace(l)) {
			kept = append(kept, l)
		}
	}
	src := strings.Join(kept, "\n")
	fset := token.NewFileSet()
	if _, err := parser.ParseFile(fset, "", "package p\nfunc _() {\n"+src+"\n}\n", 0); err == nil {
		return true
	}
	_, err := parser.ParseFile(fset, "", "package p\n"+src+"\n", 0)
	return err == nil
}

// inOrder reports whether each part occurs contiguously in body, each after the last.
func inOrder(body []string, ps [][]string) bool {
	for _, p := range ps {
		i := index(body, p)
		if i < 0 {
			return false
		}
		body = body[i+len(p):]
	}
	return true
}

// exampleBodies returns the normalized source lines of every Example function in the
// repository's test files, one slice per function.
func exampleBodies(t *testing.T) [][]string {
	t.Helper()
	var bodies [][]string
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") && path != repoRoot {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, src, 0)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || !strings.HasPrefix(fn.Name.Name, "Example") || fn.Body == nil {
				continue
			}
			body := string(src[fset.Position(fn.Body.Pos()).Offset:fset.Position(fn.Body.End()).Offset])
			bodies = append(bodies, normalize(strings.Split(body, "\n")))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return bodies
}

type block struct {
	where string
	lines []string
}

// readmeBlocks returns the ```go blocks of a Markdown file.
func readmeBlocks(t *testing.T, path string) []block {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []block
	var cur *block
	for i, l := range strings.Split(string(src), "\n") {
		n := i + 1
		switch {
		case cur == nil && strings.TrimSpace(l) == "```go":
			cur = &block{where: path + ":" + itoa(n)}
		case cur != nil && strings.TrimSpace(l) == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.lines = append(cur.lines, l)
		}
	}
	return out
}

// docBlocks returns the code blocks (tab-indented comment lines) of a doc.go file's
// package comment, except diagrams (lines of box-drawing characters).
func docBlocks(t *testing.T, path string) []block {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []block
	var cur *block
	flush := func() {
		if cur != nil && !strings.ContainsAny(strings.Join(cur.lines, ""), "─│►▲└┘┌┐") {
			out = append(out, *cur)
		}
		cur = nil
	}
	for i, l := range strings.Split(string(src), "\n") {
		if strings.HasPrefix(l, "//\t") {
			if cur == nil {
				cur = &block{where: path + ":" + itoa(i+1)}
			}
			cur.lines = append(cur.lines, strings.TrimPrefix(l, "//\t"))
			continue
		}
		if l == "//" && cur != nil {
			continue // a blank line inside a block
		}
		flush()
	}
	flush()
	return out
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	for n >= 10 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	i--
	b[i] = byte('0' + n)
	return string(b[i:])
}

// index returns where want occurs contiguously in have, or -1.
func index(have, want []string) int {
	for i := 0; i+len(want) <= len(have); i++ {
		match := true
		for j := range want {
			if have[i+j] != want[j] {
				match = false
				break
			}
		}
		if match {
			return i
		}
	}
	return -1
}

func TestDocCodeComesFromExamples(t *testing.T) {
	bodies := exampleBodies(t)
	var blocks []block
	blocks = append(blocks, readmeBlocks(t, filepath.Join(repoRoot, "README.md"))...)
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "internal") && path != repoRoot {
			return filepath.SkipDir
		}
		if !d.IsDir() && d.Name() == "doc.go" {
			blocks = append(blocks, docBlocks(t, path)...)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) == 0 {
		t.Fatal("no code blocks found: the walk is broken")
	}
	checked := 0
	for _, b := range blocks {
		ps := parts(b.lines)
		if len(ps) == 0 || !isGo(b.lines) {
			t.Logf("%s: not Go, not checked", strings.TrimPrefix(b.where, repoRoot+"/"))
			continue
		}
		checked++
		found := false
		for _, body := range bodies {
			if inOrder(body, ps) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("%s: code block not found in any Example function:\n%s", strings.TrimPrefix(b.where, repoRoot+"/"), strings.Join(b.lines, "\n"))
		}
	}
	if checked < 10 {
		t.Errorf("only %d Go blocks checked: the extraction is broken", checked)
	}
}
