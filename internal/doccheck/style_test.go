package doccheck

import (
	"fmt"
	"go/ast"
	"go/doc/comment"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
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
// it). TODO(issue 23): these are the packages other branches move or rewrite; once they
// have landed, fix their comments and empty this list.
var notYetFixed = []string{
	".",
	"cmd/idem-bench",
	"dynamo/...",
	"idemstore",
	"idemstore/storetest",
	"internal/ddbfault",
	"internal/samtables",
	"internal/samtemplate",
	"internal/sim",
	"lab/...",
	"lambdawrap",
}

// goFile is one parsed non-test Go file.
type goFile struct {
	path  string // slash-separated, relative to the repository root
	dir   string // its package directory, "." for the root
	fset  *token.FileSet
	file  *ast.File
	lines []string
}

// sourceFiles parses every non-test Go file of the repository.
func sourceFiles(t *testing.T) []goFile {
	t.Helper()
	var out []goFile
	err := filepath.WalkDir(repoRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if p != repoRoot && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, p, src, parser.ParseComments)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(repoRoot, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		out = append(out, goFile{path: rel, dir: path.Dir(rel), fset: fset, file: f, lines: strings.Split(string(src), "\n")})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) < 50 {
		t.Fatalf("only %d Go files found: the walk is broken", len(out))
	}
	return out
}

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

// docComment is the doc comment of one declared name (or of the package).
type docComment struct {
	where    string // file:line of the comment
	name     string
	exported bool
	pkg      bool // the package's doc comment
	group    *ast.CommentGroup
}

// docComments returns the doc comments of f: the package's, and those of its top-level
// declarations and of the fields and methods of its struct and interface types.
func docComments(f goFile) []docComment {
	var out []docComment
	add := func(cg *ast.CommentGroup, name string, exported bool) {
		if cg == nil {
			return
		}
		where := fmt.Sprintf("%s:%d", f.path, f.fset.Position(cg.Pos()).Line)
		out = append(out, docComment{where: where, name: name, exported: exported, group: cg})
	}
	add(f.file.Doc, "package "+f.file.Name.Name, true)
	if len(out) == 1 {
		out[0].pkg = true
	}
	fields := func(owner string, exported bool, fl *ast.FieldList) {
		for _, fd := range fl.List {
			for _, n := range fd.Names {
				add(fd.Doc, owner+"."+n.Name, exported && n.IsExported())
			}
		}
	}
	for _, decl := range f.file.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			name, exported := d.Name.Name, d.Name.IsExported()
			if d.Recv != nil && len(d.Recv.List) == 1 {
				recv := receiverName(d.Recv.List[0].Type)
				name = recv + "." + name
				exported = exported && ast.IsExported(recv)
			}
			add(d.Doc, name, exported)
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					doc := s.Doc
					if doc == nil && len(d.Specs) == 1 {
						doc = d.Doc
					}
					add(doc, s.Name.Name, s.Name.IsExported())
					switch ty := s.Type.(type) {
					case *ast.StructType:
						fields(s.Name.Name, s.Name.IsExported(), ty.Fields)
					case *ast.InterfaceType:
						fields(s.Name.Name, s.Name.IsExported(), ty.Methods)
					}
				case *ast.ValueSpec:
					doc := s.Doc
					if doc == nil && len(d.Specs) == 1 {
						doc = d.Doc
					}
					exported := slices.ContainsFunc(s.Names, (*ast.Ident).IsExported)
					add(doc, s.Names[0].Name, exported)
				}
			}
			if len(d.Specs) > 1 {
				exported := false
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						exported = exported || s.Name.IsExported()
					case *ast.ValueSpec:
						exported = exported || slices.ContainsFunc(s.Names, (*ast.Ident).IsExported)
					}
				}
				add(d.Doc, "("+d.Tok.String()+" group)", exported)
			}
		}
	}
	return out
}

// receiverName is the type name of a method's receiver.
func receiverName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return receiverName(e.X)
	case *ast.IndexExpr:
		return receiverName(e.X)
	case *ast.IndexListExpr:
		return receiverName(e.X)
	case *ast.Ident:
		return e.Name
	}
	return ""
}

// tooLong reports whether d is the doc comment of a declaration, runs over
// maxListlessLines lines and has no list.
func tooLong(f goFile, d docComment) bool {
	return !d.pkg && lineCount(f, d.group) > maxListlessLines && !hasList(d.group)
}

// lineCount is how many source lines a comment group spans.
func lineCount(f goFile, cg *ast.CommentGroup) int {
	return f.fset.Position(cg.End()).Line - f.fset.Position(cg.Pos()).Line + 1
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

// TestStyleRules checks the rules of TestCommentStyle on small sources, so a broken rule
// cannot pass for a clean tree.
func TestStyleRules(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("word ", 20) // 100 columns
	path := strings.Repeat("a", 100)
	tests := []struct {
		name     string
		src      string
		long     []int // lines of comments past maxColumn
		tooLong  []string
		sentence []int // words in each sentence of the first doc comment
	}{
		{
			name: "a comment line of 100 columns passes, 101 fails",
			src:  "// " + long[:97] + "\n// " + long[:98] + "\npackage p\n",
			long: []int{2},
		},
		{
			name: "a tab counts up to the next multiple of four",
			src:  "package p\n\nfunc f() {\n\t// " + long[:93] + "\n\t// " + long[:94] + "\n}\n",
			long: []int{5},
		},
		{
			name: "a trailing comment counts with its line",
			src:  "package p\n\nvar x = 1 // " + long[:88] + "\n",
			long: []int{3},
		},
		{
			name: "a URL alone, or a link definition, may run long",
			src: "package p\n\n// X is.\n//\n// https://example.com/" + path + "\n//\n// [Y]: https://example.com/" + path +
				"\n// see https://example.com/" + path + "\nvar X = 1\n",
			long: []int{8},
		},
		{
			name:    "a long doc comment without a list fails, one with a list passes",
			src:     "package p\n\n" + strings.Repeat("// A b.\n", 13) + "func A() {}\n\n" + strings.Repeat("// B c.\n", 13) + "//\n//   - d\nfunc B() {}\n",
			tooLong: []string{"A"},
		},
		{
			name: "a long package doc comment passes",
			src:  strings.Repeat("// P q.\n", 20) + "package p\n",
		},
		{
			name:     "sentences end at a period, question or exclamation mark, or the paragraph's end",
			src:      "package p\n\n// F does one thing. It waits, e.g. for [T.M]; see \"x.\" Why? Because\n//\n//   - a list item\nfunc F() {}\n",
			sentence: []int{4, 7, 1, 1, 3},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fset := token.NewFileSet()
			file, err := parser.ParseFile(fset, "p.go", tc.src, parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			f := goFile{path: "p.go", dir: ".", fset: fset, file: file, lines: strings.Split(tc.src, "\n")}
			if got := longCommentLines(f); !slices.Equal(got, tc.long) {
				t.Errorf("long comment lines: got %v, want %v", got, tc.long)
			}
			var tooLongs []string
			var words []int
			for _, d := range docComments(f) {
				if tooLong(f, d) {
					tooLongs = append(tooLongs, d.name)
				}
				if words == nil && !d.pkg {
					for _, s := range sentences(d.group) {
						words = append(words, len(s))
					}
				}
			}
			if !slices.Equal(tooLongs, tc.tooLong) {
				t.Errorf("long doc comments without a list: got %v, want %v", tooLongs, tc.tooLong)
			}
			if tc.sentence != nil && !slices.Equal(words, tc.sentence) {
				t.Errorf("words per sentence: got %v, want %v", words, tc.sentence)
			}
		})
	}
}
