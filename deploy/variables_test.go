package deploy_test

import (
	"bufio"
	"bytes"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/JorisJonkers-dev/delivery/internal/backup"
	"github.com/JorisJonkers-dev/delivery/internal/collector"
	"github.com/JorisJonkers-dev/delivery/internal/garagecatalog"
	"github.com/JorisJonkers-dev/delivery/internal/githubapp"
	"github.com/JorisJonkers-dev/delivery/internal/ociimage"
	"github.com/JorisJonkers-dev/delivery/internal/postgrescatalog"
	"github.com/JorisJonkers-dev/delivery/internal/releasegate"
	"github.com/JorisJonkers-dev/delivery/internal/releasehistory"
	"github.com/JorisJonkers-dev/delivery/internal/releaserecord"
	"github.com/JorisJonkers-dev/delivery/internal/reporter"
	"github.com/JorisJonkers-dev/delivery/internal/settings"
	"github.com/JorisJonkers-dev/delivery/internal/vaultpolicy"
)

// variables are the variables each image's binary reads, as the binary's
// --help lists them, by the image's name. The three backup images run one
// binary, each its own method.
var variables = map[string][]settings.Variable{
	"release-gate":     releasegate.Variables,
	"collector":        collector.Variables,
	"reporter":         reporter.Variables,
	"release-record":   slices.Concat(releaserecord.Variables, releasehistory.ReadVariables, releasehistory.ScrapeVariables),
	"vault-policy":     vaultpolicy.Variables,
	"postgres-catalog": postgrescatalog.Variables,
	"garage-catalog":   garagecatalog.Variables,
	"backup-files":     backupVariables("files"),
	"backup-postgres":  backupVariables("postgres"),
	"backup-rabbitmq":  backupVariables("rabbitmq"),
}

// variablesOf is the variables a container's binary reads, by its image;
// the release record's image run with the argument sweep is the sweep,
// which reads its own.
func variablesOf(c corev1.Container) ([]settings.Variable, bool) {
	if imageName(c.Image) == "release-record" && slices.Equal(c.Args, []string{"sweep"}) {
		return releasehistory.SweepVariables, true
	}
	vars, ok := variables[imageName(c.Image)]
	return vars, ok
}

func backupVariables(method string) []settings.Variable {
	m, ok := backup.MethodNamed(method)
	if !ok {
		panic("no backup method " + method)
	}
	return backup.VariablesOf(m)
}

// imageName is an image reference's last path segment without its tag or
// digest: ghcr.io/x/delivery/collector:v1@sha256:… is collector.
func imageName(ref string) string {
	ref, _, _ = strings.Cut(ref, "@")
	name := path.Base(ref)
	name, _, _ = strings.Cut(name, ":")
	return name
}

// TestEveryVariableSetIsOneItsServiceReads holds every container of the
// base, the overlay and the job templates to its binary's own variables:
// each variable it sets is one the binary reads, none is set twice, every
// required one is set (GitHub's key exactly one way; an off-cluster copy's
// variables all with a destination and none without), and no envFrom hides
// which variables it brings but the cluster ConfigMap's, read from the build.
func TestEveryVariableSetIsOneItsServiceReads(t *testing.T) {
	sets := builds(t)
	for _, file := range templates {
		sets[file] = decode(t, file, readTemplate(t, file))
	}
	for set, o := range sets {
		for _, w := range o.workloads() {
			for _, c := range w.pod.Containers {
				if !slices.Contains(ociimage.Names(), imageName(c.Image)) {
					t.Errorf("%s: %s runs image %s, which make images does not build", set, w, c.Image)
				}
				vars, ok := variablesOf(c)
				if !ok {
					t.Errorf("%s: %s runs image %s, whose variables this test does not know", set, w, c.Image)
					continue
				}
				from, problems := o.fromCluster(c, vars)
				for _, problem := range problems {
					t.Errorf("%s: %s: %s", set, w, problem)
				}
				var names []string
				for _, e := range c.Env {
					if slices.Contains(names, e.Name) {
						t.Errorf("%s: %s sets %s twice", set, w, e.Name)
					}
					if slices.Contains(from, e.Name) {
						t.Errorf("%s: %s sets %s, which the cluster ConfigMap says: the one place", set, w, e.Name)
					}
					names = append(names, e.Name)
					if e.ValueFrom == nil && e.Value == "" {
						t.Errorf("%s: %s sets %s empty", set, w, e.Name)
					}
				}
				for _, problem := range checkVariables(append(names, from...), vars) {
					t.Errorf("%s: %s: %s", set, w, problem)
				}
			}
		}
	}
}

// checkVariables says what is wrong with a set of variable names for a
// binary that reads vars.
func checkVariables(names []string, vars []settings.Variable) []string {
	var problems []string
	known := map[string]settings.Variable{}
	for _, v := range vars {
		known[v.Name] = v
	}
	for _, n := range names {
		if _, ok := known[n]; !ok {
			problems = append(problems, n+" is no variable its binary reads")
		}
	}
	set := func(n string) bool { return slices.Contains(names, n) }
	for _, v := range vars {
		if v.Default == settings.Required && !set(v.Name) {
			problems = append(problems, "the required "+v.Name+" is not set")
		}
	}
	if _, ok := known[githubapp.EnvPrivateKey]; ok && set(githubapp.EnvPrivateKey) == set(githubapp.EnvPrivateKeyFile) {
		problems = append(problems, "GitHub's key must be given exactly one way: "+githubapp.EnvPrivateKey+" or "+githubapp.EnvPrivateKeyFile)
	}
	if _, ok := known["BACKUP_OFF_CLUSTER"]; ok {
		for _, v := range vars {
			withDestination := v.Default == backup.RequiredWithDestination
			switch {
			case set("BACKUP_OFF_CLUSTER") && withDestination && !set(v.Name):
				problems = append(problems, v.Name+" is required with BACKUP_OFF_CLUSTER")
			case !set("BACKUP_OFF_CLUSTER") && strings.HasPrefix(v.Name, "BACKUP_OFF_CLUSTER_") && set(v.Name):
				problems = append(problems, v.Name+" is set without BACKUP_OFF_CLUSTER, which stops the run")
			}
		}
	}
	return problems
}

// envFile is one base.env: its variables in order, each with its value.
type envFile struct {
	names  []string
	values map[string]string
}

// readEnvFile reads a dotenv file: KEY=VALUE lines, # comments and blank
// lines; a key given twice fails the test.
func readEnvFile(t *testing.T, file string) envFile {
	t.Helper()
	raw, err := os.ReadFile(filepath.FromSlash(file))
	if err != nil {
		t.Fatal(err)
	}
	f := envFile{values: map[string]string{}}
	scanner := bufio.NewScanner(bytes.NewReader(raw))
	for line := 1; scanner.Scan(); line++ {
		text := strings.TrimSpace(scanner.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		key, value, ok := strings.Cut(text, "=")
		if !ok || key == "" || strings.ContainsAny(key, " \t") {
			t.Fatalf("%s:%d: not KEY=VALUE", file, line)
		}
		if _, dup := f.values[key]; dup {
			t.Fatalf("%s:%d: %s given twice (only a cluster's overlay may write a key again)", file, line, key)
		}
		f.names = append(f.names, key)
		f.values[key] = value
	}
	return f
}

// TestEnvFilesAreTheDeploymentsVariables holds each env/<process>/base.env,
// the environment deploy-kit renders for the Process, to its binary's
// variables by the same rules as the containers, and to the variables the
// base's Deployment sets (less one taken from the pod's name, which no
// placeholder gives): the two ways of deploying the service configure the
// same things.
func TestEnvFilesAreTheDeploymentsVariables(t *testing.T) {
	o := decode(t, "the base", build(t, base))
	for _, s := range services {
		f := readEnvFile(t, "env/"+s+"/base.env")
		for _, problem := range checkVariables(f.names, variables[s]) {
			t.Errorf("env/%s/base.env: %s", s, problem)
		}
		c := o.deployment(t, s).Spec.Template.Spec.Containers[0]
		deployed, _ := o.fromCluster(c, variables[s])
		cluster := o.clusterConfig(t)
		for _, name := range deployed {
			if f.values[name] != cluster.Data[name] {
				t.Errorf("env/%s/base.env sets %s=%s, the cluster ConfigMap %s: the two ways of deploying name one cluster",
					s, name, f.values[name], cluster.Data[name])
			}
		}
		for _, e := range c.Env {
			// A pod's own name has no placeholder: deploy-kit's render leaves
			// such a variable to its default.
			if e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "metadata.name" {
				deployed = append(deployed, e.Name)
			}
		}
		if !sameSet(f.names, deployed) {
			t.Errorf("env/%s/base.env sets %v, the Deployment %v", s, sorted(f.names), sorted(deployed))
		}
	}
	if entries, err := os.ReadDir("env"); err != nil || len(entries) != len(services) {
		t.Errorf("env/ holds %d folders, not one per service (%v)", len(entries), err)
	}
}

func sameSet(a, b []string) bool { return slices.Equal(sorted(a), sorted(b)) }

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// fieldRefNamespace says whether a variable takes its pod's namespace.
func fieldRefNamespace(e corev1.EnvVar) bool {
	return e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace"
}
