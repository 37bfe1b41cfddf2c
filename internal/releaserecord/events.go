package releaserecord

import (
	"crypto/sha256"
	_ "embed"
	"fmt"
	"regexp"
	"strings"
	"time"

	cdevents "github.com/cdevents/sdk-go/pkg/api"
	cdeventsv05 "github.com/cdevents/sdk-go/pkg/api/v05"
	"github.com/package-url/packageurl-go"
)

// The custom events' type: dev.cdeventsx.delivery-release.<predicate>.0.1.0.
// CDEvents 0.5 has no event for a deploy begun or failed.
const (
	customTool    = "delivery"
	customSubject = "release"
	customVersion = "0.1.0"
)

// ReleaseEventSchemaURI names the custom events' schema, which the SDK holds
// every custom event to.
const ReleaseEventSchemaURI = "https://github.com/JorisJonkers-dev/delivery/internal/releaserecord/schema/release-event.schema.json"

// ReleaseEventSchema is the JSON Schema of the custom events.
//
//go:embed schema/release-event.schema.json
var ReleaseEventSchema []byte

func init() {
	// The SDK validates a custom event against the schema its schemaUri
	// names, from its own registry.
	if err := cdevents.LoadJsonSchema(ReleaseEventSchemaURI, ReleaseEventSchema); err != nil {
		panic(fmt.Sprintf("the release event schema: %v", err))
	}
}

// CustomType is the CDEvents type of a custom event.
func CustomType(predicate EventType) cdevents.CDEventType {
	return cdevents.CDEventType{Custom: customTool, Subject: customSubject, Predicate: string(predicate), Version: customVersion}
}

// TypeOf is an event's CDEvents type. The SDK's custom event answers
// GetType with no type at all (v0.5.1); its context holds the type it
// carries.
func TypeOf(ev cdevents.CDEventReader) cdevents.CDEventType {
	if c, ok := ev.(*cdeventsv05.CustomTypeEvent); ok {
		return c.Context.Type
	}
	return ev.GetType()
}

// ReleaseContent is the subject's content of a custom event.
type ReleaseContent struct {
	ReleaseID  string `json:"releaseId"`
	App        string `json:"app"`
	Env        string `json:"env"`
	Cluster    string `json:"cluster"`
	ArtifactID string `json:"artifactId"`
	// Outcome is a failure's: sync-failed, aborted or degraded.
	Outcome string `json:"outcome,omitempty"`
	// Reason is the failure's words, the record's lastError.
	Reason string `json:"reason,omitempty"`
}

// EventID is an event's id: a UUID (version 8) made of the SHA-256 of the
// release id, the event type and its outcome, so a repeat after a failed
// write is the same event and a receiver can drop it.
func EventID(releaseID string, e Event) string {
	sum := sha256.Sum256([]byte(releaseID + "\x00" + string(e.Type) + "\x00" + e.Outcome))
	b := sum[:16]
	b[6] = b[6]&0x0f | 0x80
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// Source is the events' source: the service in one cluster and env.
func Source(cluster, env string) string { return "/release-record/" + cluster + "/" + env }

// CDEvent is e as the CDEvent it goes out as, validated by the SDK.
func CDEvent(rec Record, e Event, at time.Time) (cdevents.CDEventV04, error) {
	var ev cdevents.CDEventV04
	artifact := ArtifactID(rec)
	env := &cdevents.Reference{Id: rec.Cluster + "/" + rec.Env, Source: Source(rec.Cluster, rec.Env)}
	switch e.Type {
	case EventDeployed:
		d, err := cdeventsv05.NewServiceDeployedEvent()
		if err != nil {
			return nil, err
		}
		d.SetSubjectArtifactId(artifact)
		d.SetSubjectEnvironment(env)
		ev = d
	case EventUpgraded:
		u, err := cdeventsv05.NewServiceUpgradedEvent()
		if err != nil {
			return nil, err
		}
		u.SetSubjectArtifactId(artifact)
		u.SetSubjectEnvironment(env)
		ev = u
	case EventRolledBack:
		r, err := cdeventsv05.NewServiceRolledbackEvent()
		if err != nil {
			return nil, err
		}
		r.SetSubjectArtifactId(artifact)
		r.SetSubjectEnvironment(env)
		ev = r
	case EventDeploying, EventFailed:
		c, err := cdeventsv05.NewCustomTypeEvent()
		if err != nil {
			return nil, err
		}
		c.SetEventType(CustomType(e.Type))
		c.SetSchemaUri(ReleaseEventSchemaURI)
		content := ReleaseContent{ReleaseID: rec.ReleaseID, App: rec.App, Env: rec.Env, Cluster: rec.Cluster, ArtifactID: artifact}
		if e.Type == EventFailed {
			content.Outcome, content.Reason = e.Outcome, rec.LastError
		}
		c.SetSubjectContent(content)
		ev = c
	default:
		return nil, fmt.Errorf("no CDEvent for the event %q", e.Key())
	}
	ev.SetId(EventID(rec.ReleaseID, e))
	ev.SetSource(Source(rec.Cluster, rec.Env))
	ev.SetTimestamp(at.UTC())
	if e.Type == EventDeploying || e.Type == EventFailed {
		ev.SetSubjectId(rec.ReleaseID)
	} else {
		ev.SetSubjectId(rec.App)
	}
	if id, err := ParseReleaseID(rec.ReleaseID); err == nil {
		ev.SetChainId(id.Chain)
	}
	if err := cdevents.Validate(ev); err != nil {
		return nil, fmt.Errorf("the %s event of %s does not validate: %w", e.Key(), rec.ReleaseID, err)
	}
	return ev, nil
}

// ArtifactID is the release's artifact as a purl: pkg:oci/<name>@<digest>
// with its repository_url (and tag) for an image or OCI artifact, and
// pkg:generic/<app>@<version> when the facts named neither.
func ArtifactID(rec Record) string {
	if p, ok := ociPurl(rec.Image); ok {
		return p
	}
	id, err := ParseReleaseID(rec.ReleaseID)
	if err == nil && digestPattern.MatchString(rec.Image) {
		// A Project's record holds its pinned digest alone.
		return packageurl.NewPackageURL(packageurl.TypeOCI, "", id.App(), rec.Image, nil, "").ToString()
	}
	if err != nil {
		return packageurl.NewPackageURL(packageurl.TypeGeneric, "", "unknown", "", nil, "").ToString()
	}
	return packageurl.NewPackageURL(packageurl.TypeGeneric, "", id.App(), id.Version(), nil, "").ToString()
}

var digestPattern = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// ociPurl reads <repository>[:<tag>][@<digest>], with or without oci://.
func ociPurl(image string) (string, bool) {
	image = strings.TrimPrefix(image, "oci://")
	repo, digest, _ := strings.Cut(image, "@")
	tag := ""
	if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
		repo, tag = repo[:i], repo[i+1:]
	}
	name := repo[strings.LastIndex(repo, "/")+1:]
	if name == "" || digestPattern.MatchString(image) || strings.ContainsAny(image, " \t\n") || (digest == "" && tag == "") {
		return "", false
	}
	qualifiers := packageurl.QualifiersFromMap(map[string]string{"repository_url": repo})
	if tag != "" {
		qualifiers = packageurl.QualifiersFromMap(map[string]string{"repository_url": repo, "tag": tag})
	}
	p := packageurl.NewPackageURL(packageurl.TypeOCI, "", strings.ToLower(name), digest, qualifiers, "")
	if _, err := packageurl.FromString(p.ToString()); err != nil {
		return "", false
	}
	return p.ToString(), true
}

// SentEvent is the CDEvents type and id an event of the sent sets went out
// with, from its key; ok is false for a key of no event.
func SentEvent(releaseID, key string) (eventType, id string, ok bool) {
	e, ok := eventOf(key)
	if !ok {
		return "", "", false
	}
	switch e.Type {
	case EventDeployed:
		eventType = cdeventsv05.ServiceDeployedEventType.String()
	case EventUpgraded:
		eventType = cdeventsv05.ServiceUpgradedEventType.String()
	case EventRolledBack:
		eventType = cdeventsv05.ServiceRolledbackEventType.String()
	default:
		eventType = CustomType(e.Type).String()
	}
	return eventType, EventID(releaseID, e), true
}
