package rpcrdma_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// libraryModules are the modules a program importing the library's
// packages may get in its module graph. What only the command or a
// benchmark needs must not be among them: a user's scanners would report
// it and version selection would raise the user's own requirements.
var libraryModules = []string{"golang.org/x/sys"}

// TestUserModuleGraph builds, in a temporary directory, a module that
// imports every package of the library (not the command, not internal
// ones) through a replace directive pointing here, and checks that
// "go list -m all" lists nothing beyond libraryModules.
func TestUserModuleGraph(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command in PATH")
	}
	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	// run runs the go command in dir, offline; modMod lets it update
	// dir's go.mod (only the temporary module's).
	run := func(dir string, modMod bool, args ...string) string {
		t.Helper()
		cmd := exec.Command(goCmd, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOPROXY=off", "GOWORK=off")
		if modMod {
			cmd.Env = append(cmd.Env, "GOFLAGS=-mod=mod")
		}
		out, err := cmd.Output()
		if err != nil {
			stderr := ""
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = string(ee.Stderr)
			}
			t.Fatalf("go %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr)
		}
		return string(out)
	}
	var imports []string
	for _, line := range strings.Fields(run(root, false, "list", "-e", "-f", `{{if and (ne .Name "main") (not .Incomplete)}}{{.ImportPath}}{{end}}`, "./...")) {
		if !strings.Contains(line, "/internal/") && !strings.HasSuffix(line, "/internal") {
			imports = append(imports, line)
		}
	}
	if len(imports) < 5 {
		t.Fatalf("library packages: %v", imports)
	}
	dir := t.TempDir()
	var src strings.Builder
	src.WriteString("package main\n\nimport (\n")
	for _, p := range imports {
		src.WriteString("\t_ \"" + p + "\"\n")
	}
	src.WriteString(")\n\nfunc main() {}\n")
	mod := "module example.com/user\n\ngo 1.26.0\n\nrequire github.com/go-rpcrdma/rpcrdma v0.0.0\n\nreplace github.com/go-rpcrdma/rpcrdma => " + root + "\n"
	sum, err := os.ReadFile(filepath.Join(root, "go.sum")) // the checksums the library's requirements need; nothing is fetched
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{"main.go": src.String(), "go.mod": mod, "go.sum": string(sum)} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run(dir, true, "mod", "tidy")
	for _, m := range strings.Split(strings.TrimSpace(run(dir, true, "list", "-m", "-f", "{{.Path}}", "all")), "\n") {
		if m != "example.com/user" && m != "github.com/go-rpcrdma/rpcrdma" && !slices.Contains(libraryModules, m) {
			t.Errorf("a module importing the library gets %s in its graph", m)
		}
	}
}
