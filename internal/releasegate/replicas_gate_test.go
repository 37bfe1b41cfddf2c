package releasegate_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/JorisJonkers-dev/delivery/internal/testenv"
)

// TestRestartedGateReopensTheBarrierAsMembersAsk: the notes only withhold. A
// new gate has none, so a waiting member counts again once it has asked.
func TestRestartedGateReopensTheBarrierAsMembersAsk(t *testing.T) {
	cp := testenv.Shared(t)
	flaggerNS := cp.Namespace(t)
	flaggerPod(t, cp, flaggerNS, "flagger-0", flagger)
	cfg := cp.Grant(t, gateRBAC, gateNS, gateSA)
	ns := cp.Namespace(t)
	a := authApp(ns)
	a.member("auth-ui").phase = "WaitingPromotion"
	a.apply(t, cp)

	first := serve(t, cfg, flaggerNS)
	first.ask(t, flagger, "/may-promote", payload(ns, "auth-ui", rev))
	if code, reason := first.ask(t, flagger, "/may-promote", payload(ns, "auth-api", rev)); code != http.StatusOK {
		t.Fatalf("the first gate: %d %q", code, reason)
	}
	restarted := serve(t, cfg, flaggerNS)
	if code, reason := restarted.ask(t, flagger, "/may-promote", payload(ns, "auth-api", rev)); code != http.StatusConflict || !strings.Contains(reason, "auth-ui is WaitingPromotion but has not asked") {
		t.Fatalf("the restarted gate before auth-ui asked: %d %q", code, reason)
	}
	restarted.ask(t, flagger, "/may-promote", payload(ns, "auth-ui", rev))
	if code, reason := restarted.ask(t, flagger, "/may-promote", payload(ns, "auth-api", rev)); code != http.StatusOK {
		t.Fatalf("the restarted gate after auth-ui asked: %d %q", code, reason)
	}
}

// TestQuestionsSwitchedToAnotherReplica: two replicas answer side by side
// and Flagger's questions move from one to the other mid-release, as after a
// failover of the replica its Service pinned Flagger to. The replica that
// saw every question is the one replica alone; the other never says yes
// where that one says no.
func TestQuestionsSwitchedToAnotherReplica(t *testing.T) {
	cp := testenv.Shared(t)
	flaggerNS := cp.Namespace(t)
	flaggerPod(t, cp, flaggerNS, "flagger-0", flagger)
	cfg := cp.Grant(t, gateRBAC, gateNS, gateSA)
	ns := cp.Namespace(t)
	a := authApp(ns)
	a.member("auth-ui").phase = "WaitingPromotion"
	a.apply(t, cp)

	alone, other := serve(t, cfg, flaggerNS), serve(t, cfg, flaggerNS)
	// ask puts one question to the replica Flagger reaches now and, so the
	// replica alone has seen it too, to that one; it returns both codes.
	ask := func(switched bool, process string) (int, int) {
		aloneCode, _ := alone.ask(t, flagger, "/may-promote", payload(ns, process, rev))
		if !switched {
			return aloneCode, aloneCode
		}
		otherCode, reason := other.ask(t, flagger, "/may-promote", payload(ns, process, rev))
		if otherCode == http.StatusOK && aloneCode != http.StatusOK {
			t.Fatalf("the other replica said yes to %s (%q) where the one replica alone said %d", process, reason, aloneCode)
		}
		return aloneCode, otherCode
	}
	ask(false, "auth-ui")
	if aloneCode, _ := ask(false, "auth-api"); aloneCode != http.StatusOK {
		t.Fatalf("the barrier is shut on the replica that saw both members ask: %d", aloneCode)
	}
	// Switched: the other replica has no notes, so it holds auth-api until
	// auth-ui asked there too, then opens as the one alone does.
	if _, otherCode := ask(true, "auth-api"); otherCode != http.StatusConflict {
		t.Fatalf("the other replica opened the barrier with no notes: %d", otherCode)
	}
	ask(true, "auth-ui")
	if _, otherCode := ask(true, "auth-api"); otherCode != http.StatusOK {
		t.Fatalf("the other replica after auth-ui asked there: %d", otherCode)
	}
	// auth-ui's analysis starts over: both replicas shut the barrier.
	a.member("auth-ui").phase = "Progressing"
	a.apply(t, cp)
	if aloneCode, otherCode := ask(true, "auth-api"); aloneCode != http.StatusConflict || otherCode != http.StatusConflict {
		t.Fatalf("auth-ui analysing again, the replicas answered %d and %d", aloneCode, otherCode)
	}
}
