package release

import (
	"errors"
	"time"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"

	"k8s.io/apimachinery/pkg/labels"
)

// ErrNotFound is a read of an object that is not there.
var ErrNotFound = errors.New("not found")

// Pod is what the gate knows of a pod.
type Pod struct {
	Name   string
	Labels map[string]string
	// IPs are status.podIPs (or status.podIP when the list is empty).
	IPs            []string
	Running        bool
	Terminating    bool
	HostNetwork    bool
	ServiceAccount string
	// Ready is the pod's Ready condition.
	Ready bool
	// Restarts is the sum of its containers' restart counts.
	Restarts int
}

// ConfigMap is a ConfigMap's labels and data.
type ConfigMap struct {
	// Name is set when the ConfigMap was listed.
	Name       string
	Labels     map[string]string
	Data       map[string]string
	BinaryData map[string][]byte
}

// Job is what the gate knows of a Job.
type Job struct {
	Name string
	// Identity is the Job's app.kubernetes.io/name label.
	Identity string
	Complete bool
	Failed   bool
	// Scheduled marks a Job a CronJob created; it is never a release step.
	Scheduled bool
}

// Canary is what the gate knows of a Flagger Canary.
type Canary struct {
	Name string
	// Webhooks holds the metadata of each of the Canary's webhooks; the
	// render writes the Application and revision into every one.
	Webhooks []map[string]string
	// Port is spec.service.port, the port of <process>-canary; 0 when unset.
	Port             int32
	Phase            flaggerv1.CanaryPhase
	Iterations       int
	LastAppliedSpec  string
	LastPromotedSpec string
	// WebhooksWrittenAt is when a writer last changed the object while
	// owning spec.analysis.webhooks, as its managed fields record; zero when
	// they do not say.
	WebhooksWrittenAt time.Time
}

// Deployment is a Deployment's selector and what its pods run.
type Deployment struct {
	Name           string
	Selector       labels.Selector
	InitContainers []Container
	Containers     []Container
	// TemplateRevision is the pod template's RevisionAnnotation; "" when the
	// render set none.
	TemplateRevision string
	// TemplateWrittenAt is when a writer last changed the object while
	// owning part of spec.template, as its managed fields record; zero when
	// they do not say.
	TemplateWrittenAt time.Time
}

// Container is what a container runs: the fields that make two copies the
// same program in the same environment.
type Container struct {
	Name    string
	Image   string
	Command []string
	Args    []string
	Env     []EnvVar
	EnvFrom []EnvSource
}

// EnvVar is one environment variable, a literal or a reference.
type EnvVar struct {
	Name  string
	Value string
	From  *EnvSource
}

// EnvSource is where a variable's value comes from: Kind is configMap,
// secret, field or resource; Name the object (or field path, or resource);
// Key the key within it; Prefix the envFrom prefix.
type EnvSource struct {
	Kind   string
	Name   string
	Key    string
	Prefix string
}
