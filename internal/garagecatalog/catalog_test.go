package garagecatalog

import (
	"os"
	"strings"
	"testing"
)

func TestDecodeFillsDefaults(t *testing.T) {
	f, err := os.Open("testdata/catalog.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c, err := Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if c.AdminAPI.URL() != "http://garage.platform.svc.cluster.local:3903" {
		t.Errorf("URL %s", c.AdminAPI.URL())
	}
	if c.AdminAPI.Version != "v2" || c.AdminToken.Field != "admin-token" {
		t.Errorf("defaults not filled: %+v %+v", c.AdminAPI, c.AdminToken)
	}
	if len(c.Keys) != 2 || c.Keys[1].DocumentPath() != "secret/data/media/immich/s3" {
		t.Errorf("keys %+v", c.Keys)
	}
}

func TestDecodeKeepsWhatIsGiven(t *testing.T) {
	c, err := Decode(strings.NewReader(`{"adminApi":{"host":"10.0.0.7","port":443,"scheme":"https","version":"v2"},
		"adminToken":{"path":"kv/data/garage","field":"token"},"keys":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.AdminAPI.URL() != "https://10.0.0.7:443" || c.AdminToken.Field != "token" {
		t.Errorf("%+v", c)
	}
}

// One case per rule of the format: each is refused, and the refusal says
// where.
func TestDecodeRefuses(t *testing.T) {
	const api = `"adminApi":{"host":"garage","port":3903}`
	const token = `"adminToken":{"path":"secret/data/platform/garage"}`
	key := func(k string) string { return `{` + api + `,` + token + `,"keys":[` + k + `]}` }
	cases := map[string]struct{ in, want string }{
		"not JSON":                  {`{`, "not JSON"},
		"no admin API":              {`{` + token + `,"keys":[]}`, "adminApi"},
		"no keys":                   {`{` + api + `,` + token + `}`, "keys"},
		"unknown top field":         {`{` + api + `,` + token + `,"keys":[],"extra":1}`, "extra"},
		"unknown key field":         {key(`{"project":"a","process":"b","buckets":["abc"],"owner":true}`), "owner"},
		"port out of range":         {`{"adminApi":{"host":"g","port":70000},` + token + `,"keys":[]}`, "/adminApi/port"},
		"host with a scheme":        {`{"adminApi":{"host":"http://g","port":1},` + token + `,"keys":[]}`, "/adminApi/host"},
		"API version unsupported":   {`{"adminApi":{"host":"g","port":1,"version":"v1"},` + token + `,"keys":[]}`, "/adminApi/version"},
		"token path not kv v2":      {`{` + api + `,"adminToken":{"path":"secret/garage"},"keys":[]}`, "/adminToken/path"},
		"token path climbing":       {`{` + api + `,"adminToken":{"path":"secret/data/../sys"},"keys":[]}`, "/adminToken/path"},
		"project with a slash":      {key(`{"project":"a/b","process":"b","buckets":["abc"]}`), "/keys/0/project"},
		"process upper case":        {key(`{"project":"a","process":"B","buckets":["abc"]}`), "/keys/0/process"},
		"no buckets":                {key(`{"project":"a","process":"b","buckets":[]}`), "/keys/0/buckets"},
		"bucket named twice":        {key(`{"project":"a","process":"b","buckets":["abc","abc"]}`), "/keys/0/buckets"},
		"bucket name too short":     {key(`{"project":"a","process":"b","buckets":["ab"]}`), "/keys/0/buckets/0"},
		"bucket name with ..":       {key(`{"project":"a","process":"b","buckets":["a..b"]}`), "/keys/0/buckets/0"},
		"bucket name upper case":    {key(`{"project":"a","process":"b","buckets":["Media"]}`), "/keys/0/buckets/0"},
		"bucket name as an address": {key(`{"project":"a","process":"b","buckets":["10.0.0.1"]}`), "/keys/0/buckets/0"},
		"bucket name in punycode":   {key(`{"project":"a","process":"b","buckets":["xn--abc"]}`), "/keys/0/buckets/0"},
		"bucket label in punycode":  {key(`{"project":"a","process":"b","buckets":["a.xn--b"]}`), "/keys/0/buckets/0"},
		"bucket name as an alias":   {key(`{"project":"a","process":"b","buckets":["media-s3alias"]}`), "/keys/0/buckets/0"},
		"project named twice":       {key(`{"project":"a","process":"b","buckets":["abc"]},{"project":"a","process":"c","buckets":["abd"]}`), "project a is named by two keys"},
		"a second document":         {key(``) + `{}`, "after top-level value"},
		"field in the wrong case":   {`{"adminapi":{"host":"g","port":1},` + token + `,"keys":[]}`, "adminapi"},
		"larger than any catalog":   {`{"keys":[` + strings.Repeat(" ", maxCatalogBytes) + `]}`, "larger than"},
		"token field not a string":  {`{` + api + `,"adminToken":{"path":"secret/data/g","field":3},"keys":[]}`, "/adminToken/field"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Decode(strings.NewReader(c.in))
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not name %q", err, c.want)
			}
		})
	}
}

func TestSchemaIsPublishedWithThePackage(t *testing.T) {
	if !strings.Contains(string(SchemaJSON), `"$schema": "https://json-schema.org/draft/2020-12/schema"`) {
		t.Error("the embedded schema is not the draft 2020-12 document")
	}
}
