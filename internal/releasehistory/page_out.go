package releasehistory

import (
	"errors"
	"net/url"
	"regexp"
	"strings"

	rr "github.com/JorisJonkers-dev/delivery/internal/releaserecord"
)

// Out is what the page links out to, as the service is set up: a cluster
// object's page (OBJECT_LINK) and the CDEvents sink (CDEVENTS_SINK).
type Out struct {
	// ObjectLink is the address template of a cluster object's page, its
	// placeholders {cluster}, {kind}, {namespace} and {name}; "" links none.
	ObjectLink string
	// Sink is where the events are sent; "" in shadow mode.
	Sink string
}

// The placeholders an object link template fills, each path-escaped.
var placeholders = []string{"{cluster}", "{kind}", "{namespace}", "{name}"}

// CheckObjectLink refuses a template that does not make an http(s) address
// of a host, without credentials, from any object: "" (no link) passes.
func CheckObjectLink(template string) error {
	if template == "" {
		return nil
	}
	if ObjectURL(template, "c", "Kind", "ns", "name") == "" {
		return errors.New("not an http(s) address of a host, without credentials, with {cluster}, {kind}, {namespace} and {name} filled")
	}
	return nil
}

// ObjectURL fills the template for one object, or "" when there is no
// template or what it makes is not an http(s) address of a host without
// credentials. Each value is path-escaped, so a name cannot reach past its
// segment.
func ObjectURL(template, cluster, kind, namespace, name string) string {
	if template == "" {
		return ""
	}
	values := []string{cluster, kind, namespace, name}
	pairs := make([]string, 0, 2*len(placeholders))
	for i, p := range placeholders {
		pairs = append(pairs, p, url.PathEscape(values[i]))
	}
	s := strings.NewReplacer(pairs...).Replace(template)
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
		return ""
	}
	return u.String()
}

// Object is one cluster object a release moved, and its page ("" when the
// page links none).
type Object struct {
	Kind, Namespace, Name string
	URL                   string
}

// String is kind/namespace/name.
func (o Object) String() string { return o.Kind + "/" + o.Namespace + "/" + o.Name }

// ObjectsOf are the objects the record says the release moved: the object
// carrying it (objectGeneration), then its objects (the Flux unit, the
// Canaries), each once, linked by the template.
func ObjectsOf(r rr.Record, template string) []Object {
	var out []Object
	seen := map[string]bool{}
	add := func(ref string) {
		parts := strings.Split(ref, "/")
		if len(parts) < 3 || seen[strings.Join(parts[:3], "/")] {
			return
		}
		seen[strings.Join(parts[:3], "/")] = true
		o := Object{Kind: parts[0], Namespace: parts[1], Name: parts[2]}
		o.URL = ObjectURL(template, r.Cluster, o.Kind, o.Namespace, o.Name)
		out = append(out, o)
	}
	if r.ObjectGeneration != "" {
		obj, _, _ := strings.Cut(r.ObjectGeneration, "=")
		add(obj)
	}
	if r.Objects != "" {
		for _, o := range strings.Split(r.Objects, ",") {
			add(o)
		}
	}
	return out
}

// digestImage is a Project's image as the record holds it: the digest its
// unit's source is pinned to.
var digestImage = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// githubRepo is a repository's address on GitHub, as this product's path
// writes gitUrl from the unit's rollout-repository.
var githubRepo = regexp.MustCompile(`^https://github\.com/([A-Za-z0-9-]{1,39})/([A-Za-z0-9._-]{1,100})$`)

// DeploymentsURL is the page of the GitHub Deployments the Reporter keeps
// the release's among, or "" when the release is not one it reports. The
// Reporter reports a Project's release on this product's path (the record's
// image a pinned digest, its gitUrl the rollout-repository on GitHub), in
// the repository's Deployment whose payload names the Project and version.
// It keeps that Deployment's id nowhere the release record reads, so the
// link is to the repository's Deployments, not to the one.
func DeploymentsURL(r rr.Record) string {
	m := githubRepo.FindStringSubmatch(r.GitURL)
	if m == nil || !digestImage.MatchString(r.Image) || m[2] == "." || m[2] == ".." {
		return ""
	}
	return "https://github.com/" + m[1] + "/" + m[2] + "/deployments"
}

// Sent is one event the release's record says went out (or, in shadow
// mode, was logged), as the sink took it: its key, CDEvents type and id.
type Sent struct {
	Key, Type, ID string
	Shadow        bool
}

// SentOf are the events of the record's sent sets, live first, each with
// the type and id it went out with (releaserecord.SentEvent).
func SentOf(r rr.Record) []Sent {
	var out []Sent
	for _, set := range []struct {
		keys   []string
		shadow bool
	}{{r.EmittedLive, false}, {r.EmittedShadow, true}} {
		for _, k := range set.keys {
			if typ, id, ok := rr.SentEvent(r.ReleaseID, k); ok {
				out = append(out, Sent{Key: k, Type: typ, ID: id, Shadow: set.shadow})
			}
		}
	}
	return out
}

// SinkShown is the sink's address as the page shows it: scheme, host and
// path, without a query or fragment, which may carry a key.
func SinkShown(sink string) string {
	u, err := url.Parse(sink)
	if sink == "" || err != nil {
		return ""
	}
	u.RawQuery, u.Fragment, u.User = "", "", nil
	return u.String()
}
