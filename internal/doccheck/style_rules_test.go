package doccheck

import (
	"go/parser"
	"go/token"
	"slices"
	"strings"
	"testing"
)

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
