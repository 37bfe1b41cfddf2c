package ociimage

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The user every image runs as: distroless's nonroot, so that a pod's
// securityContext written for those images holds for these.
const (
	UID      = 65532
	GID      = 65532
	User     = "65532:65532"
	UserName = "nonroot"
)

// CACertificates is where an image holds its CA bundle, the path Debian and
// distroless use and SSL_CERT_FILE names.
const CACertificates = "/etc/ssl/certs/ca-certificates.crt"

// Epoch is every time an image records: file times, the config's created and
// the history's, so that the time of a build never changes a digest.
var Epoch = time.Unix(0, 0).UTC()

// Root is what a layer holds that differs between images: the binary and the
// CA bundle. Everything else (the users, the folders) is the same in every
// image.
type Root struct {
	Binary  string // its name under BinaryDir
	Program []byte // its bytes
	CACerts []byte // the CA bundle, copied to CACertificates
}

const passwd = "root:x:0:0:root:/root:/sbin/nologin\n" +
	"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"

const group = "root:x:0:\nnonroot:x:65532:\n"

// entry is one file or folder of the layer; a folder has no data.
type entry struct {
	name     string
	mode     int64
	uid, gid int
	data     []byte
	dir      bool
}

// entries are the layer's files in the order the tar holds them: sorted, each
// folder before what it holds.
func (r Root) entries() []entry {
	dir := func(name string, mode int64) entry { return entry{name: name, mode: mode, dir: true} }
	file := func(name string, mode int64, data []byte) entry { return entry{name: name, mode: mode, data: data} }
	home := dir("home/nonroot/", 0o700)
	home.uid, home.gid = UID, GID
	return []entry{
		dir("etc/", 0o755),
		file("etc/group", 0o644, []byte(group)),
		file("etc/passwd", 0o644, []byte(passwd)),
		dir("etc/ssl/", 0o755),
		dir("etc/ssl/certs/", 0o755),
		file(CACertificates[1:], 0o644, r.CACerts),
		dir("home/", 0o755),
		home,
		dir("tmp/", 0o1777),
		dir("usr/", 0o755),
		dir("usr/local/", 0o755),
		dir(BinaryDir[1:]+"/", 0o755),
		file(BinaryDir[1:]+"/"+r.Binary, 0o755, r.Program),
	}
}

// Tar is the layer's uncompressed content. Each header carries only what
// the entry is (name, mode, owner, size) and the epoch, never the building
// machine's owners or times.
func (r Root) Tar() ([]byte, error) {
	if r.Binary == "" || len(r.Program) == 0 {
		return nil, fmt.Errorf("no binary for the layer")
	}
	if len(r.CACerts) == 0 {
		return nil, fmt.Errorf("no CA bundle for the layer")
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range r.entries() {
		h := &tar.Header{Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.gid, ModTime: Epoch, Format: tar.FormatUSTAR}
		if e.dir {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("write %s into the layer: %w", e.name, err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, fmt.Errorf("write %s into the layer: %w", e.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("close the layer: %w", err)
	}
	return buf.Bytes(), nil
}

// Layer is the root as an OCI layer, gzipped once and kept, so that the
// images sharing it and the files it is written to compress it once.
func (r Root) Layer() (v1.Layer, error) {
	content, err := r.Tar()
	if err != nil {
		return nil, err
	}
	open := func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(content)), nil }
	layer, err := tarball.LayerFromOpener(open, tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
	if err != nil {
		return nil, fmt.Errorf("make the layer: %w", err)
	}
	return layer, nil
}
