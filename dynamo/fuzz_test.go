package dynamo

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
)

// TestDecodeTestdata decodes the items in testdata/: records as the Powertools utilities and
// this package write them decode, and the malformed-* ones are incompatible.
func TestDecodeTestdata(t *testing.T) {
	t.Parallel()
	s := testStore(t)
	files, err := filepath.Glob("testdata/*.json")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			t.Parallel()
			raw, err := os.ReadFile(file)
			require.NoError(t, err)
			item, err := parseItem(raw)
			require.NoError(t, err)
			rec, err := s.decodeRecord(item)
			if strings.HasPrefix(filepath.Base(file), "malformed-") {
				require.ErrorIs(t, err, idem.ErrIncompatibleRecord)
				return
			}
			require.NoError(t, err)
			assert.NotEmpty(t, rec.Key)
			assert.True(t, rec.Expires.Equal(time.Unix(1772370000, 0)), "expires %v", rec.Expires)
		})
	}
}

// FuzzDecodeRecord feeds items, written as DynamoDB JSON, to the record decoder: it must
// never panic, must report a bad item as ErrIncompatibleRecord, and a record it accepts
// must survive encoding and decoding again unchanged.
func FuzzDecodeRecord(f *testing.F) {
	files, err := filepath.Glob("testdata/*.json")
	if err != nil {
		f.Fatal(err)
	}
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	f.Add([]byte(`{"id":{"S":"k"},"status":{"S":"INPROGRESS"},"in_progress_expiration":{"N":"-9223372036854775808"}}`))
	f.Add([]byte(`{"id":{"S":"k"},"status":{"S":"COMPLETED"},"expiration":{"N":"1.5e9"},"v":{"NULL":true}}`))
	s, err := New(nopAPI{}, "t")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		item, err := parseItem(raw)
		if err != nil {
			return
		}
		rec, err := s.decodeRecord(item)
		if err != nil {
			if !errors.Is(err, idem.ErrIncompatibleRecord) {
				t.Fatalf("error does not wrap ErrIncompatibleRecord: %v", err)
			}
			return
		}
		again, err := s.decodeRecord(s.encodeRecord(rec))
		if err != nil {
			t.Fatalf("re-decoding %+v: %v", rec, err)
		}
		if !sameRecord(rec, again) {
			t.Fatalf("round trip changed the record:\n%+v\n%+v", rec, again)
		}
	})
}

func sameRecord(a, b *idemstore.Record) bool {
	return a.Key == b.Key && a.Status == b.Status && a.Expires.Equal(b.Expires) &&
		a.LeaseExpires.Equal(b.LeaseExpires) && a.Fingerprint == b.Fingerprint &&
		string(a.Data) == string(b.Data) && (a.Data == nil) == (b.Data == nil) &&
		a.Encoding == b.Encoding && a.LeaseToken == b.LeaseToken &&
		a.Checkpoint == b.Checkpoint && a.Version == b.Version
}

// parseItem reads an item in DynamoDB JSON, the format of the console and the CLI.
func parseItem(raw []byte) (map[string]types.AttributeValue, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	return parseMap(m, 0)
}

func parseMap(m map[string]json.RawMessage, depth int) (map[string]types.AttributeValue, error) {
	item := make(map[string]types.AttributeValue, len(m))
	for k, v := range m {
		av, err := parseValue(v, depth)
		if err != nil {
			return nil, err
		}
		item[k] = av
	}
	return item, nil
}

func parseValue(raw json.RawMessage, depth int) (types.AttributeValue, error) {
	if depth > 32 {
		return nil, errors.New("too deep")
	}
	var typed map[string]json.RawMessage
	if err := json.Unmarshal(raw, &typed); err != nil {
		return nil, err
	}
	if len(typed) != 1 {
		return nil, fmt.Errorf("want one type, got %d", len(typed))
	}
	for typ, v := range typed {
		switch typ {
		case "S":
			var s string
			err := json.Unmarshal(v, &s)
			return &types.AttributeValueMemberS{Value: s}, err
		case "N":
			var s string
			err := json.Unmarshal(v, &s)
			return &types.AttributeValueMemberN{Value: s}, err
		case "B":
			var s string
			if err := json.Unmarshal(v, &s); err != nil {
				return nil, err
			}
			b, err := base64.StdEncoding.DecodeString(s)
			return &types.AttributeValueMemberB{Value: b}, err
		case "BOOL":
			var b bool
			err := json.Unmarshal(v, &b)
			return &types.AttributeValueMemberBOOL{Value: b}, err
		case "NULL":
			var b bool
			err := json.Unmarshal(v, &b)
			return &types.AttributeValueMemberNULL{Value: b}, err
		case "SS", "NS":
			var ss []string
			if err := json.Unmarshal(v, &ss); err != nil {
				return nil, err
			}
			if typ == "SS" {
				return &types.AttributeValueMemberSS{Value: ss}, nil
			}
			return &types.AttributeValueMemberNS{Value: ss}, nil
		case "L":
			var l []json.RawMessage
			if err := json.Unmarshal(v, &l); err != nil {
				return nil, err
			}
			out := make([]types.AttributeValue, len(l))
			for i, e := range l {
				av, err := parseValue(e, depth+1)
				if err != nil {
					return nil, err
				}
				out[i] = av
			}
			return &types.AttributeValueMemberL{Value: out}, nil
		case "M":
			var m map[string]json.RawMessage
			if err := json.Unmarshal(v, &m); err != nil {
				return nil, err
			}
			out, err := parseMap(m, depth+1)
			return &types.AttributeValueMemberM{Value: out}, err
		}
		return nil, fmt.Errorf("unknown type %q", typ)
	}
	panic("unreachable")
}
