package kinesalite_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/proctest"
	"github.com/idemkit/idem/lab/kinesalite"
)

func TestStartWithoutThePackage(t *testing.T) {
	t.Setenv(kinesalite.EnvDir, t.TempDir())
	_, err := kinesalite.Start(context.Background())
	assert.ErrorIs(t, err, kinesalite.ErrNotInstalled)
}

func TestStartAndStop(t *testing.T) {
	s, err := kinesalite.Start(context.Background())
	if err != nil {
		require.ErrorIs(t, err, kinesalite.ErrNotInstalled)
		proctest.Unavailable(t, kinesalite.EnvRequire, err)
	}
	client := kinesalite.NewClient(s.Endpoint())
	_, err = client.ListStreams(context.Background(), nil)
	assert.NoError(t, err)
	require.NoError(t, s.Stop())
	assert.NoError(t, s.Stop(), "a second Stop returns the first result")
	_, err = client.ListStreams(context.Background(), nil)
	assert.Error(t, err, "kinesalite still answers after Stop")
}
