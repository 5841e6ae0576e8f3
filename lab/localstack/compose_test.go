package localstack

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

// TestComposeFile checks that localstack/compose.yaml takes the image and the artifacts bucket from
// the environment compose.sh sets, so the init hook creates the bucket deploy.sh uses.
func TestComposeFile(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join("..", "..", "localstack", "compose.yaml"))
	require.NoError(t, err)
	var c struct {
		Services map[string]struct {
			Image       string
			Environment map[string]string
		}
	}
	require.NoError(t, yaml.Unmarshal(data, &c))
	ls := c.Services["localstack"]
	assert.True(t, strings.HasPrefix(ls.Image, "${LOCALSTACK_IMAGE:?"), "image %q: chosen by compose.sh, never a silent default", ls.Image)
	assert.True(t, strings.HasPrefix(ls.Environment["SAM_ARTIFACTS_BUCKET"], "${SAM_ARTIFACTS_BUCKET"),
		"SAM_ARTIFACTS_BUCKET must reach the init hook: %q", ls.Environment["SAM_ARTIFACTS_BUCKET"])
	assert.Equal(t, "${LOCALSTACK_AUTH_TOKEN:-}", ls.Environment["LOCALSTACK_AUTH_TOKEN"])
}
