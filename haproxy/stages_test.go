package haproxy

import (
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The package's stages, each a set of files: a stage uses only itself and
// the stages before it (issue 27.4).
var stages = []struct {
	name  string
	files []string
}{
	{"lex: HAProxy's quoting, escapes and environment, word by word", []string{"lex.go"}},
	{"parse: sections, lines, conditions, the 1.x keywords as 2.x, the split of a mixed file", []string{"config.go", "cfgcond.go", "legacy.go", "condition.go", "files.go", "split.go"}},
	{"read and resolve: the keyword registry, defaults and sides, each keyword's reader, ACLs, what lines say together; the typed model",
		[]string{"keywords.go", "registry.go", "sides.go", "servers.go", "model.go", "global.go", "frontend.go", "backend.go", "backendrules.go", "site.go",
			"acl.go", "variables.go", "answer.go", "connection.go", "logformat.go", "ratelimit.go", "maxconn.go", "stats.go", "logging.go", "tlsdefaults.go", "defaultcert.go",
			"crtlist.go", "bcrypt.go", "refusals.go", "errorpages.go", "compression.go", "userlist.go", "resolvers.go", "tuning.go", "cache.go", "stick.go", "pathrewrite.go", "fcgi.go", "nbsrv.go"}},
	{"emit: the model as Caddyfile text, every value through one token writer", []string{"caddyfile.go", "token.go", "emit.go",
		"emit_backend.go", "emit_frontend.go", "emit_answer.go", "emit_matcher.go", "emit_fcgi.go"}},
	{"translate: the stages in turn, and the report of each line", []string{"translate.go", "report.go"}},
}

// Each stage uses only the stages before it: a function, method, type,
// variable or constant of the package used in a file is declared in a
// file of the same stage or an earlier one; every file of the package is
// in a stage.
func TestStagesUseOnlyEarlierStages(t *testing.T) {
	stageOf := map[string]int{}
	for i, s := range stages {
		for _, f := range s.files {
			stageOf[f] = i
		}
	}
	fset := token.NewFileSet()
	names, _ := filepath.Glob("*.go")
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		if _, ok := stageOf[name]; !ok {
			t.Errorf("%s is in no stage", name)
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}}
	imp := stageImporter{std: importer.ForCompiler(fset, "gc", nil), module: importer.ForCompiler(fset, "source", nil)}
	pkg, err := (&types.Config{Importer: imp}).Check("haproxy", fset, files, info)
	if err != nil {
		t.Fatal(err)
	}
	var back []string
	for id, obj := range info.Uses {
		if obj.Pkg() != pkg || !obj.Pos().IsValid() || obj.Parent() != pkg.Scope() && !isMethodOrField(obj) {
			continue
		}
		user, decl := fset.Position(id.Pos()), fset.Position(obj.Pos())
		from, to := stageOf[filepath.Base(user.Filename)], stageOf[filepath.Base(decl.Filename)]
		if to > from {
			back = append(back, fmt.Sprintf("%s:%d uses %s (%s, stage %d) from stage %d", filepath.Base(user.Filename), user.Line, obj.Name(), filepath.Base(decl.Filename), to, from))
		}
	}
	slices.Sort(back)
	for _, b := range back {
		t.Error(b)
	}
}

// stageImporter reads the standard library's export data (quick), and a
// module's package from its source (the export data of the module cache's
// packages is not where the gc importer looks).
type stageImporter struct{ std, module types.Importer }

func (i stageImporter) Import(path string) (*types.Package, error) {
	if first, _, _ := strings.Cut(path, "/"); strings.Contains(first, ".") {
		return i.module.Import(path)
	}
	return i.std.Import(path)
}

func isMethodOrField(obj types.Object) bool {
	switch o := obj.(type) {
	case *types.Func:
		return o.Type().(*types.Signature).Recv() != nil
	case *types.Var:
		return o.IsField()
	}
	return false
}

func TestStagesNameFiles(t *testing.T) {
	for _, s := range stages {
		for _, f := range s.files {
			if _, err := os.Stat(f); err != nil {
				t.Errorf("stage %q: %v", s.name, err)
			}
		}
	}
}
