package releasegate

import (
	"k8s.io/apimachinery/pkg/labels"

	"github.com/JorisJonkers-dev/delivery/internal/release"
)

// CopyState is what a member's new copy shows: how many pods, how many ready
// and the pod that restarted most.
type CopyState struct {
	Pods, Ready   int
	MostRestarted string
	MostRestarts  int
	FirstNotReady string
}

// ReadCopy sums up the pods of a new copy. A pod being deleted is no pod of
// the copy, as a ReplicaSet does not count it ready: it stays until its
// kubelet confirms, and will serve no one. Its restarts still count, since
// they say how the new code ran.
func ReadCopy(pods []release.Pod) CopyState {
	var s CopyState
	for _, p := range pods {
		if p.Restarts > s.MostRestarts {
			s.MostRestarts, s.MostRestarted = p.Restarts, p.Name
		}
		if p.Terminating {
			continue
		}
		s.Pods++
		if p.Ready {
			s.Ready++
		} else if s.FirstNotReady == "" {
			s.FirstNotReady = p.Name
		}
	}
	return s
}

// ready is a new copy with at least one pod, every one of them ready.
func (s CopyState) ready() bool { return s.Pods > 0 && s.Ready == s.Pods }

func selectPods(pods []release.Pod, sel labels.Selector) []release.Pod {
	var out []release.Pod
	for _, p := range pods {
		if sel.Matches(labels.Set(p.Labels)) {
			out = append(out, p)
		}
	}
	return out
}
