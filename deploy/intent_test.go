package deploy_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// deployKitSpec is deploy-kit's published spec, vendored at the ref third_party/deploy-kit/REF names.
const deployKitSpec = "../third_party/deploy-kit/spec/v1"

// intentFile is the delivery project's Project Intent.
const intentFile = "delivery.project.yml"

// intent is the part of a Project Intent these tests read.
type intent struct {
	Applications []struct {
		ID        string    `json:"id"`
		Processes []process `json:"processes"`
	} `json:"applications"`
}

type process struct {
	Name      string           `json:"name"`
	Image     string           `json:"image"`
	Provides  map[string]int32 `json:"provides"`
	DependsOn []struct {
		Application string `json:"application"`
		Surface     string `json:"surface"`
	} `json:"dependsOn"`
	Secrets []struct {
		Path     string   `json:"path"`
		Keys     []string `json:"keys"`
		Delivery string   `json:"delivery"`
		MountAt  string   `json:"mountAt"`
	} `json:"secrets"`
	API *struct {
		Reason string `json:"reason"`
		Rules  []struct {
			Group   string   `json:"group"`
			Objects []string `json:"objects"`
			Verbs   []string `json:"verbs"`
		} `json:"rules"`
	} `json:"api"`
	Probes struct {
		Readiness struct {
			Path string `json:"path"`
			Port int32  `json:"port"`
		} `json:"readiness"`
		Liveness struct {
			Path string `json:"path"`
			Port int32  `json:"port"`
		} `json:"liveness"`
	} `json:"probes"`
}

func readIntent(t *testing.T) (intent, []byte) {
	t.Helper()
	raw, err := os.ReadFile(intentFile)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := yaml.YAMLToJSON(raw)
	if err != nil {
		t.Fatalf("%s: %v", intentFile, err)
	}
	var in intent
	if err := json.Unmarshal(doc, &in); err != nil {
		t.Fatalf("%s: %v", intentFile, err)
	}
	return in, doc
}

func (in intent) process(name string) (process, bool) {
	for _, a := range in.Applications {
		for _, p := range a.Processes {
			if p.Name == name {
				return p, true
			}
		}
	}
	return process{}, false
}

// readSpecJSON reads one of deploy-kit's JSON documents.
func readSpecJSON(t *testing.T, rel string) map[string]any {
	t.Helper()
	file := filepath.Join(filepath.FromSlash(deployKitSpec), filepath.FromSlash(rel))
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("deploy-kit's %s is absent (%v): refresh the vendored copy (third_party/deploy-kit/README.md)", rel, err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return doc
}

// projectIntentSchema compiles deploy-kit's project-intent.schema.json. The
// copy at hand predates the Process's api field that chapter 10 specifies
// and the worked delivery example uses (its corpus accepts that example):
// where the schema lacks it, the field is added as deploy-kit's Resolved
// Application schema defines it (ResolvedApiAccess without the server the
// Platform supplies, ResolvedApiRule, ApiVerb), and nothing else changes.
func projectIntentSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	schema := readSpecJSON(t, "schemas/project-intent.schema.json")
	defs := schema["$defs"].(map[string]any)
	props := defs["Process"].(map[string]any)["properties"].(map[string]any)
	if _, ok := props["api"]; !ok {
		resolved := readSpecJSON(t, "schemas/resolved-application.schema.json")["$defs"].(map[string]any)
		access := clone(t, resolved["ResolvedApiAccess"]).(map[string]any)
		delete(access["properties"].(map[string]any), "server")
		access["required"] = []any{"reason", "rules"}
		access["properties"].(map[string]any)["rules"].(map[string]any)["items"] = map[string]any{"$ref": "#/$defs/ResolvedApiRule"}
		defs["ApiAccess"] = access
		defs["ResolvedApiRule"] = resolved["ResolvedApiRule"]
		defs["ApiVerb"] = resolved["ApiVerb"]
		props["api"] = map[string]any{"$ref": "#/$defs/ApiAccess"}
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("project-intent.schema.json", schema); err != nil {
		t.Fatal(err)
	}
	compiled, err := c.Compile("project-intent.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return compiled
}

func clone(t *testing.T, v any) any {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func validate(t *testing.T, schema *jsonschema.Schema, doc []byte) error {
	t.Helper()
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	return schema.Validate(inst)
}

// TestProjectIntentValidates holds delivery.project.yml to deploy-kit's
// project-intent.schema.json, and the schema as read here to deploy-kit's
// own worked delivery project (which it must accept) and to an api block
// with a verb outside deploy-kit's list (which it must refuse).
func TestProjectIntentValidates(t *testing.T) {
	schema := projectIntentSchema(t)
	_, doc := readIntent(t)
	if err := validate(t, schema, doc); err != nil {
		t.Errorf("%s: %v", intentFile, err)
	}
	raw, err := os.ReadFile(filepath.Join(filepath.FromSlash(deployKitSpec), "examples", "delivery", "delivery.project.yml"))
	if err != nil {
		t.Fatal(err)
	}
	worked, err := yaml.YAMLToJSON(raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := validate(t, schema, worked); err != nil {
		t.Errorf("the schema refuses deploy-kit's worked delivery project: %v", err)
	}
	if escalating := bytes.Replace(doc, []byte(`"verbs":["list","patch"]`), []byte(`"verbs":["escalate"]`), 1); bytes.Equal(escalating, doc) {
		t.Fatal("the intent grants no jobs list, patch to replace")
	} else if err := validate(t, schema, escalating); err == nil {
		t.Error("the schema admits the verb escalate")
	}
}

// rule is one group, object and verb an api block or a ClusterRole grants.
type rule struct{ group, object, verb string }

// TestAPIBlocksAreTheGrants holds each api block of the Project Intent to
// the service's rbac.yaml: an api block derives a ClusterRole, so it must
// ask exactly the cluster-wide rules the ClusterRoles bound to the service's
// ServiceAccount grant: no more, and nothing the service needs less. What
// the grant holds in Roles, which no api block can say, is logged.
func TestAPIBlocksAreTheGrants(t *testing.T) {
	in, _ := readIntent(t)
	for _, s := range services {
		p, ok := in.process(s)
		if !ok || p.API == nil {
			t.Errorf("%s: the intent declares no api for %s", intentFile, s)
			continue
		}
		var asked []rule
		for _, r := range p.API.Rules {
			for _, obj := range r.Objects {
				for _, v := range r.Verbs {
					asked = append(asked, rule{r.Group, obj, v})
				}
			}
		}
		rbac := decode(t, s+"/rbac.yaml", readTemplate(t, s+"/rbac.yaml"))
		var granted []rule
		for _, b := range rbac.clusterBinds {
			if !slices.ContainsFunc(b.Subjects, func(sub rbacv1.Subject) bool { return sub.Kind == "ServiceAccount" && sub.Name == s }) {
				continue
			}
			for _, cr := range rbac.clusterRoles {
				if cr.Name != b.RoleRef.Name {
					continue
				}
				for _, r := range cr.Rules {
					if len(r.ResourceNames) != 0 || len(r.NonResourceURLs) != 0 {
						t.Errorf("%s/rbac.yaml: ClusterRole %s holds a rule no api block can say: %v", s, cr.Name, r)
					}
					for _, g := range r.APIGroups {
						if g == "" {
							g = "core"
						}
						for _, res := range r.Resources {
							for _, v := range r.Verbs {
								granted = append(granted, rule{g, res, v})
							}
						}
					}
				}
			}
		}
		for _, r := range asked {
			if !slices.Contains(granted, r) {
				t.Errorf("%s: the intent's api asks %s %s on %s, which %s/rbac.yaml does not grant cluster-wide", s, r.verb, r.object, r.group, s)
			}
		}
		for _, r := range granted {
			if !slices.Contains(asked, r) {
				t.Errorf("%s: %s/rbac.yaml grants %s %s on %s, which the intent's api does not ask", s, s, r.verb, r.object, r.group)
			}
		}
		for _, role := range rbac.roles {
			t.Logf("%s: Role %s/%s, which no api block can say, grants %v", s, role.Namespace, role.Name, role.Rules)
		}
	}
}

// placeholder is one ${source:argument} in an env file's value.
var placeholder = regexp.MustCompile(`\$\{([a-z]+):([^}]*)\}`)

// TestEnvFilesFollowDeployKit holds each env/<process>/base.env to deploy-kit's
// rules for env files: the folder names a Process of the intent; a
// ${secret:<path>#<key>} names a path the Process is granted for env
// delivery, byte for byte, and a key of that grant; a
// ${dependency:<application>.<host|port>} an Application the Process depends
// on; an ${identity:…} one of its three keys; nothing else is a placeholder.
// A file grant's mountAt is what the variable naming the file says.
func TestEnvFilesFollowDeployKit(t *testing.T) {
	in, _ := readIntent(t)
	for _, s := range services {
		p, ok := in.process(s)
		if !ok {
			t.Errorf("env/%s names no Process of %s", s, intentFile)
			continue
		}
		f := readEnvFile(t, "env/"+s+"/base.env")
		for _, name := range f.names {
			val := f.values[name]
			if strings.Count(val, "${") != len(placeholder.FindAllString(val, -1)) {
				t.Errorf("env/%s: %s=%s holds a ${ that is no placeholder", s, name, val)
			}
			for _, m := range placeholder.FindAllStringSubmatch(val, -1) {
				if problem := checkPlaceholder(p, m[1], m[2]); problem != "" {
					t.Errorf("env/%s: %s: %s", s, name, problem)
				}
			}
		}
		for _, g := range p.Secrets {
			if g.Delivery == "file" && !slices.ContainsFunc(f.names, func(n string) bool { return strings.HasSuffix(n, "_FILE") && f.values[n] == g.MountAt }) {
				t.Errorf("env/%s: no *_FILE variable names the file %s the grant %s lands at", s, g.MountAt, g.Path)
			}
		}
	}
}

func checkPlaceholder(p process, source, arg string) string {
	switch source {
	case "secret":
		path, key, ok := strings.Cut(arg, "#")
		if !ok {
			return "${secret:" + arg + "} names no key"
		}
		for _, g := range p.Secrets {
			if g.Path == path && g.Delivery == "env" && slices.Contains(g.Keys, key) {
				return ""
			}
		}
		return "${secret:" + arg + "} names no key of a path the Process is granted for env delivery"
	case "dependency":
		app, coordinate, ok := strings.Cut(arg, ".")
		if !ok || (coordinate != "host" && coordinate != "port") {
			return "${dependency:" + arg + "} is not <application>.host or .port"
		}
		for _, d := range p.DependsOn {
			if d.Application == app {
				return ""
			}
		}
		return "${dependency:" + arg + "}: the Process does not depend on " + app
	case "identity":
		if slices.Contains([]string{"vaultRole", "serviceAccount", "namespace"}, arg) {
			return ""
		}
		return "${identity:" + arg + "} is none of vaultRole, serviceAccount, namespace"
	default:
		return "${" + source + ":" + arg + "} is no placeholder these files use"
	}
}

// TestIntentMatchesTheDeployments holds the intent's probes, port and image
// for each service to the base's Deployment, and each Deployment's *_FILE
// variable to a file its container mounts: the two ways of deploying a
// service run it the same way.
func TestIntentMatchesTheDeployments(t *testing.T) {
	in, _ := readIntent(t)
	o := decode(t, "the base", build(t, base))
	for _, s := range services {
		p, ok := in.process(s)
		if !ok {
			t.Errorf("%s declares no Process %s", intentFile, s)
			continue
		}
		c := o.deployment(t, s).Spec.Template.Spec.Containers[0]
		if imageName(c.Image) != p.Image || p.Provides["http"] != c.Ports[0].ContainerPort {
			t.Errorf("%s: the intent runs image %s on %d, the Deployment %s on %d", s, p.Image, p.Provides["http"], c.Image, c.Ports[0].ContainerPort)
		}
		if c.ReadinessProbe.HTTPGet.Path != p.Probes.Readiness.Path || c.LivenessProbe.HTTPGet.Path != p.Probes.Liveness.Path ||
			p.Probes.Readiness.Port != c.Ports[0].ContainerPort || p.Probes.Liveness.Port != c.Ports[0].ContainerPort {
			t.Errorf("%s: the intent's probes %+v are not the Deployment's", s, p.Probes)
		}
		for _, e := range c.Env {
			if strings.HasSuffix(e.Name, "_FILE") && !mounted(c, e.Value) {
				t.Errorf("%s: %s=%s names a file the container does not mount", s, e.Name, e.Value)
			}
		}
	}
}

// mounted says whether a file lies under one of a container's mounts.
func mounted(c corev1.Container, file string) bool {
	for _, m := range c.VolumeMounts {
		if strings.HasPrefix(file, strings.TrimSuffix(m.MountPath, "/")+"/") {
			return true
		}
	}
	return false
}
