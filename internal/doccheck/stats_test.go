package doccheck

import (
	"go/ast"
	"go/doc/comment"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// abbreviation matches the abbreviations whose period ends no sentence.
var abbreviation = regexp.MustCompile(`\b(e\.g|i\.e|etc|vs|cf)\.`)

// sentenceEnd matches the end of a sentence: a period, question or exclamation mark,
// maybe closed by a quote or bracket, then a space or the end of the text.
var sentenceEnd = regexp.MustCompile(`[.!?]["')\]]*(\s+|$)`)

// sentences returns the words of each sentence of a doc comment's prose, leaving out code
// blocks and headings. A paragraph or list item that ends without a period ends a sentence
// too.
func sentences(cg *ast.CommentGroup) [][]string {
	var p comment.Parser
	var out [][]string
	var para func(text []comment.Text) string
	para = func(text []comment.Text) string {
		var b strings.Builder
		for _, t := range text {
			switch t := t.(type) {
			case comment.Plain:
				b.WriteString(string(t))
			case comment.Italic:
				b.WriteString(string(t))
			case *comment.Link:
				b.WriteString(para(t.Text))
			case *comment.DocLink:
				b.WriteString(para(t.Text))
			}
		}
		return b.String()
	}
	add := func(text string) {
		text = abbreviation.ReplaceAllStringFunc(text, func(s string) string { return strings.ReplaceAll(s, ".", "") })
		for _, s := range sentenceEnd.Split(text, -1) {
			if w := strings.Fields(s); len(w) > 0 {
				out = append(out, w)
			}
		}
	}
	for _, b := range p.Parse(cg.Text()).Content {
		switch b := b.(type) {
		case *comment.Paragraph:
			add(para(b.Text))
		case *comment.List:
			for _, it := range b.Items {
				for _, c := range it.Content {
					if pb, ok := c.(*comment.Paragraph); ok {
						add(para(pb.Text))
					}
				}
			}
		}
	}
	return out
}

// TestDocStats prints the doc-comment metrics of issue 23; run it with
// `go test ./internal/doccheck -run TestDocStats -v`. It checks nothing but that it found
// doc comments.
func TestDocStats(t *testing.T) {
	files := sourceFiles(t)
	type tally struct{ words, sentences, docs int }
	perDir := map[string]*tally{}
	var all tally
	long, longFiles, longTestFiles := 0, 0, 0
	for _, f := range files {
		long += len(longCommentLines(f))
		if len(f.lines)-1 > 300 { // the last line ends with a newline
			longFiles++
		}
		for _, d := range docComments(f) {
			if !d.exported || f.file.Name.Name == "main" {
				continue
			}
			tl := perDir[f.dir]
			if tl == nil {
				tl = &tally{}
				perDir[f.dir] = tl
			}
			tl.docs++
			all.docs++
			for _, s := range sentences(d.group) {
				tl.words += len(s)
				tl.sentences++
				all.words += len(s)
				all.sentences++
			}
		}
	}
	err := filepath.WalkDir(repoRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != repoRoot && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if strings.Count(string(src), "\n") > 300 {
			longTestFiles++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if all.sentences == 0 {
		t.Fatal("no doc-comment sentences found: the parsing is broken")
	}
	dirs := make([]string, 0, len(perDir))
	for d := range perDir {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	for _, d := range dirs {
		tl := perDir[d]
		if tl.sentences > 0 {
			t.Logf("%-36s %4d docs %5d sentences %5.1f words a sentence", d, tl.docs, tl.sentences, float64(tl.words)/float64(tl.sentences))
		}
	}
	t.Logf("mean words per doc-comment sentence (exported identifiers, non-main packages): %.1f (%d sentences in %d doc comments)",
		float64(all.words)/float64(all.sentences), all.sentences, all.docs)
	t.Logf("comment lines past column %d (tab = %d columns, non-test files): %d", maxColumn, tabWidth, long)
	t.Logf("Go files over 300 lines: %d non-test, %d test", longFiles, longTestFiles)
}
