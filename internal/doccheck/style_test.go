package doccheck

import (
	"fmt"
	"go/ast"
	"go/doc/comment"
	"slices"
	"strings"
	"testing"
)

// The comment style of STYLE.md, checked in every non-test Go file of the repository (all
// its modules):
//
//   - No comment line ends past column maxColumn, a tab counting tabWidth columns, unless
//     it holds nothing but a URL (or a link definition, "[text]: URL"), which cannot be
//     wrapped.
//   - No doc comment of a declaration runs over maxListlessLines lines without a list.
//
// A doc comment that long either describes cases, which read better as a list, or gives
// reasons, which belong in the body or in doc.go. Twelve lines is about three short
// paragraphs: room for what the identifier does, its units and defaults, and the errors
// it returns. A package's doc comment is where the reasons go, so it may run longer.
const (
	maxColumn        = 100
	tabWidth         = 4
	maxListlessLines = 12
)

// notYetFixed holds the packages the style check reports but does not fail, as a path
// relative to the repository root ("." is the root package; "dir/..." is dir and all below
// it). It is empty: every package follows the style. A package may wait here only while
// another branch moves or rewrites it, with a TODO saying which.
var notYetFixed = []string{}

// pending reports whether dir is in notYetFixed.
func pending(dir string) bool {
	return slices.ContainsFunc(notYetFixed, func(p string) bool { return pendingUnder(p, dir) })
}

// width is how many columns s takes, tabs advancing to the next multiple of tabWidth.
func width(s string) int {
	w := 0
	for _, r := range s {
		if r == '\t' {
			w += tabWidth - w%tabWidth
			continue
		}
		w++
	}
	return w
}

// longCommentLines returns the lines of f (1-based) that hold comment text ending past
// maxColumn, except lines of a URL alone.
func longCommentLines(f goFile) []int {
	var out []int
	for _, cg := range f.file.Comments {
		for _, c := range cg.List {
			first, last := f.fset.Position(c.Pos()).Line, f.fset.Position(c.End()).Line
			for n := first; n <= last; n++ {
				if width(f.lines[n-1]) > maxColumn && !urlOnly(f.lines[n-1]) {
					out = append(out, n)
				}
			}
		}
	}
	return out
}

// urlOnly reports whether a comment line holds nothing but a URL or a link definition.
func urlOnly(line string) bool {
	s := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "//"))
	if strings.HasPrefix(s, "[") {
		if _, def, ok := strings.Cut(s, "]: "); ok {
			s = def
		}
	}
	return strings.Contains(s, "://") && !strings.ContainsAny(s, " \t")
}

// tooLong reports whether d is the doc comment of a declaration, runs over
// maxListlessLines lines and has no list.
func tooLong(f goFile, d docComment) bool {
	return !d.pkg && lineCount(f, d.group) > maxListlessLines && !hasList(d.group)
}

// hasList reports whether a doc comment has a list.
func hasList(cg *ast.CommentGroup) bool {
	var p comment.Parser
	for _, b := range p.Parse(cg.Text()).Content {
		if _, ok := b.(*comment.List); ok {
			return true
		}
	}
	return false
}

// TestCommentStyle fails on a comment line past maxColumn and on a doc comment of more
// than maxListlessLines lines without a list, outside the packages of notYetFixed (whose
// findings it logs).
func TestCommentStyle(t *testing.T) {
	var waiting []string
	for _, f := range sourceFiles(t) {
		var found []string
		for _, n := range longCommentLines(f) {
			found = append(found, fmt.Sprintf("%s:%d: comment line of %d columns (at most %d, a tab counting %d)",
				f.path, n, width(f.lines[n-1]), maxColumn, tabWidth))
		}
		for _, d := range docComments(f) {
			if n := lineCount(f, d.group); tooLong(f, d) {
				found = append(found, fmt.Sprintf("%s: the doc comment of %s has %d lines and no list (at most %d): "+
					"give its cases as a list, or move reasons to the body or doc.go", d.where, d.name, n, maxListlessLines))
			}
		}
		if pending(f.dir) {
			waiting = append(waiting, found...)
			continue
		}
		for _, msg := range found {
			t.Error(msg)
		}
	}
	if len(waiting) > 0 {
		t.Logf("%d findings in packages not fixed yet (notYetFixed):\n%s", len(waiting), strings.Join(waiting, "\n"))
	}
}

// TestNotYetFixedIsNeeded logs the entries of notYetFixed that no longer hold a finding:
// the list is a TODO, to shrink as packages are fixed.
func TestNotYetFixedIsNeeded(t *testing.T) {
	files := sourceFiles(t)
	for _, p := range notYetFixed {
		needed := false
		for _, f := range files {
			if !pendingUnder(p, f.dir) {
				continue
			}
			if len(longCommentLines(f)) > 0 {
				needed = true
			}
			for _, d := range docComments(f) {
				if tooLong(f, d) {
					needed = true
				}
			}
		}
		if !needed {
			t.Logf("notYetFixed: %q holds no finding now: remove it", p)
		}
	}
}

// pendingUnder reports whether the notYetFixed entry p covers dir.
func pendingUnder(p, dir string) bool {
	if base, ok := strings.CutSuffix(p, "/..."); ok {
		return dir == base || strings.HasPrefix(dir, base+"/")
	}
	return dir == p
}
