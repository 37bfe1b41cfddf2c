package releaserecord

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// A release id is <chain id>:<cluster>/<env>, and a chain id is
// <app>@<version>: the same version released to another cluster or
// environment is another release, with another record.
var (
	chainIDPattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9.-]{0,61}[a-z0-9])?@[A-Za-z0-9][A-Za-z0-9.+_-]{0,127}$`)
	namePattern    = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
)

// ReleaseID is a release id taken apart.
type ReleaseID struct {
	// Chain is the chain id, <app>@<version>, shared by every event of the
	// release.
	Chain   string
	Cluster string
	Env     string
}

// ErrMalformedID marks a release id that is not <app>@<version>:<cluster>/<env>.
var ErrMalformedID = errors.New("malformed release id")

// ParseReleaseID reads <app>@<version>:<cluster>/<env>.
func ParseReleaseID(s string) (ReleaseID, error) {
	chain, place, ok := strings.Cut(s, ":")
	if !ok {
		return ReleaseID{}, fmt.Errorf("%w %q: no ':' between the chain id and <cluster>/<env>", ErrMalformedID, clip(s))
	}
	cluster, env, ok := strings.Cut(place, "/")
	switch {
	case !ok:
		return ReleaseID{}, fmt.Errorf("%w %q: no '/' between cluster and env", ErrMalformedID, clip(s))
	case !chainIDPattern.MatchString(chain):
		return ReleaseID{}, fmt.Errorf("%w %q: the chain id is not <app>@<version>", ErrMalformedID, clip(s))
	case !namePattern.MatchString(cluster):
		return ReleaseID{}, fmt.Errorf("%w %q: the cluster is not a DNS label", ErrMalformedID, clip(s))
	case !namePattern.MatchString(env):
		return ReleaseID{}, fmt.Errorf("%w %q: the env is not a DNS label", ErrMalformedID, clip(s))
	}
	return ReleaseID{Chain: chain, Cluster: cluster, Env: env}, nil
}

// NewReleaseID names app's version released to cluster and env.
func NewReleaseID(app, version, cluster, env string) (ReleaseID, error) {
	return ParseReleaseID(app + "@" + version + ":" + cluster + "/" + env)
}

// String is the release id as records and events carry it.
func (id ReleaseID) String() string { return id.Chain + ":" + id.Cluster + "/" + id.Env }

// App is the chain id's application, before the '@'.
func (id ReleaseID) App() string { app, _, _ := strings.Cut(id.Chain, "@"); return app }

// Version is the chain id's version, after the '@'.
func (id ReleaseID) Version() string { _, v, _ := strings.Cut(id.Chain, "@"); return v }

// RecordName is the name of the release's ConfigMap: release-<the first 32
// hex digits of the SHA-256 of the release id>. A hash, because a release id
// holds characters a name may not.
func RecordName(releaseID string) string {
	sum := sha256.Sum256([]byte(releaseID))
	return "release-" + hex.EncodeToString(sum[:16])
}

// clip keeps a quoted outside value short enough for one log line.
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
