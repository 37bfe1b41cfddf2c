package deploy_test

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/JorisJonkers-dev/delivery/internal/settings"
)

// clusterConfigName is the ConfigMap deploy/cluster generates: the one
// place the cluster and environment every service names are said. Kustomize
// adds a hash of its values to the name.
const clusterConfigName = "delivery-cluster"

// clusterKeys are what the ConfigMap says, each a variable a service reads.
var clusterKeys = []string{"CLUSTER_NAME", "ENVIRONMENT"}

// clusterConfig is the build's cluster ConfigMap.
func (o objects) clusterConfig(t *testing.T) *corev1.ConfigMap {
	t.Helper()
	for _, cm := range o.configMaps {
		if strings.HasPrefix(cm.Name, clusterConfigName+"-") {
			return cm
		}
	}
	t.Fatalf("no ConfigMap %s in the build", clusterConfigName)
	return nil
}

// fromCluster is what a container takes by envFrom, the variables of the
// cluster ConfigMap its binary reads, and what is wrong with its envFrom:
// the cluster ConfigMap of the same build, by the name Kustomize gave it,
// is the one source an envFrom may name, so every other variable stays in
// the manifest.
func (o objects) fromCluster(c corev1.Container, vars []settings.Variable) (names, problems []string) {
	for _, from := range c.EnvFrom {
		if from.SecretRef != nil || from.ConfigMapRef == nil || from.Prefix != "" {
			problems = append(problems, "takes envFrom of something other than the cluster ConfigMap, which hides the variables it sets")
			continue
		}
		i := slices.IndexFunc(o.configMaps, func(cm *corev1.ConfigMap) bool { return cm.Name == from.ConfigMapRef.Name })
		if i < 0 || !strings.HasPrefix(from.ConfigMapRef.Name, clusterConfigName+"-") {
			problems = append(problems, "takes envFrom "+from.ConfigMapRef.Name+", not the cluster ConfigMap of its build")
			continue
		}
		for key := range o.configMaps[i].Data {
			if slices.ContainsFunc(vars, func(v settings.Variable) bool { return v.Name == key }) {
				names = append(names, key)
			}
		}
	}
	return sorted(names), problems
}

// TestOnePlaceNamesTheCluster holds the base and the overlay to one
// ConfigMap naming the cluster and the environment: it says both and
// nothing else, and every container whose binary reads either takes it
// from there (TestEveryVariableSetIsOneItsServiceReads refuses one that
// also sets it itself).
func TestOnePlaceNamesTheCluster(t *testing.T) {
	for dir, o := range builds(t) {
		cm := o.clusterConfig(t)
		var keys []string
		for k, v := range cm.Data {
			keys = append(keys, k)
			if v == "" {
				t.Errorf("%s: the cluster ConfigMap says %s empty", dir, k)
			}
		}
		if !sameSet(keys, clusterKeys) {
			t.Errorf("%s: the cluster ConfigMap says %v, want %v", dir, sorted(keys), clusterKeys)
		}
		readers := 0
		for _, w := range o.workloads() {
			for _, c := range w.pod.Containers {
				vars, _ := variablesOf(c)
				reads := slices.ContainsFunc(vars, func(v settings.Variable) bool { return slices.Contains(clusterKeys, v.Name) })
				if !reads {
					continue
				}
				readers++
				if from, _ := o.fromCluster(c, vars); len(from) == 0 {
					t.Errorf("%s: %s reads the cluster's name but not from the cluster ConfigMap", dir, w)
				}
			}
		}
		if readers < 2 {
			t.Errorf("%s: %d services read the cluster's name, want the Collector and the release record", dir, readers)
		}
	}
}
