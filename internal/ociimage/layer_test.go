package ociimage

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"strings"
	"testing"
)

var sample = Root{Binary: "collector", Program: []byte("\x7fELF program"), CACerts: []byte("-----BEGIN CERTIFICATE-----\n")}

type tarEntry struct {
	typ      byte
	mode     int64
	uid, gid int
	content  string // what a file holds, or part of it
}

func readTar(t *testing.T, r io.Reader) (names []string, entries map[string]tarEntry) {
	t.Helper()
	entries = map[string]tarEntry{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return names, entries
		}
		if err != nil {
			t.Fatal(err)
		}
		if !h.ModTime.Equal(Epoch) || h.Uname != "" || h.Gname != "" {
			t.Errorf("%s: time %v, owner names %q %q: the building machine leaked in", h.Name, h.ModTime, h.Uname, h.Gname)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		entries[h.Name] = tarEntry{typ: h.Typeflag, mode: h.Mode, uid: h.Uid, gid: h.Gid, content: string(data)}
	}
}

func TestRootHoldsTheBinaryTheBundleTheUserAndTmp(t *testing.T) {
	content, err := sample.Tar()
	if err != nil {
		t.Fatal(err)
	}
	names, entries := readTar(t, bytes.NewReader(content))
	want := map[string]tarEntry{
		"etc/":                              {tar.TypeDir, 0o755, 0, 0, ""},
		"etc/group":                         {tar.TypeReg, 0o644, 0, 0, "nonroot:x:65532:"},
		"etc/passwd":                        {tar.TypeReg, 0o644, 0, 0, "nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin"},
		"etc/ssl/":                          {tar.TypeDir, 0o755, 0, 0, ""},
		"etc/ssl/certs/":                    {tar.TypeDir, 0o755, 0, 0, ""},
		"etc/ssl/certs/ca-certificates.crt": {tar.TypeReg, 0o644, 0, 0, "-----BEGIN CERTIFICATE-----\n"},
		"home/":                             {tar.TypeDir, 0o755, 0, 0, ""},
		"home/nonroot/":                     {tar.TypeDir, 0o700, UID, GID, ""},
		"tmp/":                              {tar.TypeDir, 0o1777, 0, 0, ""},
		"usr/":                              {tar.TypeDir, 0o755, 0, 0, ""},
		"usr/local/":                        {tar.TypeDir, 0o755, 0, 0, ""},
		"usr/local/bin/":                    {tar.TypeDir, 0o755, 0, 0, ""},
		"usr/local/bin/collector":           {tar.TypeReg, 0o755, 0, 0, "\x7fELF program"},
	}
	if len(names) != len(want) {
		t.Errorf("the layer holds %v", names)
	}
	for name, w := range want {
		got, ok := entries[name]
		if !ok {
			t.Errorf("no %s in the layer", name)
			continue
		}
		if got.typ != w.typ || got.mode != w.mode || got.uid != w.uid || got.gid != w.gid || !strings.Contains(got.content, w.content) {
			t.Errorf("%s: %+v, want %+v", name, got, w)
		}
	}
	for i := 1; i < len(names); i++ {
		if names[i-1] >= names[i] {
			t.Errorf("%s before %s: the layer is not in order", names[i-1], names[i])
		}
	}
	for _, name := range names {
		if strings.HasSuffix(name, "/sh") || strings.HasPrefix(name, "bin") {
			t.Errorf("%s: the image would hold a shell", name)
		}
	}
}

func TestRootRefusesAMissingPart(t *testing.T) {
	for _, c := range []struct {
		root Root
		want string
	}{
		{Root{Program: []byte("x"), CACerts: []byte("x")}, "no binary"},
		{Root{Binary: "x", CACerts: []byte("x")}, "no binary"},
		{Root{Binary: "x", Program: []byte("x")}, "no CA bundle"},
	} {
		if _, err := c.root.Layer(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want %q", c.root, err, c.want)
		}
	}
}

// TestLayerIsTheTarGzipped: the blob is the tar, gzipped, with an OCI media
// type, and the same root gives the same digest.
func TestLayerIsTheTarGzipped(t *testing.T) {
	layer, err := sample.Layer()
	if err != nil {
		t.Fatal(err)
	}
	again, err := sample.Layer()
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := layer.Digest()
	d2, _ := again.Digest()
	if d1 != d2 {
		t.Errorf("the same root gave %s and %s", d1, d2)
	}
	mt, _ := layer.MediaType()
	if mt != "application/vnd.oci.image.layer.v1.tar+gzip" {
		t.Errorf("media type %s", mt)
	}
	rc, err := layer.Compressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	gz, err := gzip.NewReader(rc)
	if err != nil {
		t.Fatal(err)
	}
	names, _ := readTar(t, gz)
	if len(names) != 13 {
		t.Errorf("the blob holds %v", names)
	}
}
