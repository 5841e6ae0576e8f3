package doccheck

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

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

// lineCount is how many source lines a comment group spans.
func lineCount(f goFile, cg *ast.CommentGroup) int {
	return f.fset.Position(cg.End()).Line - f.fset.Position(cg.Pos()).Line + 1
}
