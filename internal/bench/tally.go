package bench

import (
	"maps"
	"time"
)

// tally accumulates one scenario's measured windows (one per round) before
// they become a ScenarioResult.
type tally struct {
	scenario         Scenario
	window           time.Duration
	handshakes       []time.Duration // latency of each handshake counted
	requests         []time.Duration // latency of each request answered
	request          bool
	resumed          int64
	errors           map[string]int64
	cpuKnown         bool
	serverCPU        time.Duration
	serverHandshakes int64 // -1 when unknown
	serverCores      int
	loadCPU          time.Duration
	loadCPUs         int
	rounds           []float64 // handshakes per server CPU-second of each round
	// negotiated counts full handshakes by what they agreed on,
	// negotiatedResumed resumed ones.
	negotiated, negotiatedResumed map[string]int64
	// stoppedEarly is set when every connection failed (deadAfter).
	stoppedEarly bool
}

func (t *tally) perServerCPUSecond() float64 {
	if !t.cpuKnown || t.serverCPU <= 0 {
		return 0
	}
	return float64(len(t.handshakes)) / t.serverCPU.Seconds()
}

// add merges another round of the same scenario.
func (t *tally) add(o *tally) {
	t.window += o.window
	t.handshakes = append(t.handshakes, o.handshakes...)
	t.requests = append(t.requests, o.requests...)
	t.resumed += o.resumed
	for k, n := range o.errors {
		t.errors[k] += n
	}
	t.cpuKnown = t.cpuKnown && o.cpuKnown
	t.serverCPU += o.serverCPU
	if t.serverHandshakes >= 0 && o.serverHandshakes >= 0 {
		t.serverHandshakes += o.serverHandshakes
	} else {
		t.serverHandshakes = -1
	}
	t.loadCPU += o.loadCPU
	t.rounds = append(t.rounds, o.rounds...)
	for k, n := range o.negotiated {
		t.negotiated[k] += n
	}
	for k, n := range o.negotiatedResumed {
		t.negotiatedResumed[k] += n
	}
	t.stoppedEarly = t.stoppedEarly || o.stoppedEarly
}

// name is the row's name: what most handshakes negotiated (full ones
// first), with the scenario's resumption suffix; the scenario's name when
// none succeeded.
func (t *tally) name() (string, map[string]int64) {
	counts := t.negotiated
	if len(counts) == 0 {
		counts = t.negotiatedResumed
	}
	label, mixed := mostCommon(counts)
	if label == "" {
		return t.scenario.Name, nil
	}
	all := maps.Clone(t.negotiated)
	for k, n := range t.negotiatedResumed {
		all[k+" (resumed)"] += n
	}
	name := label + t.scenario.resumeSuffix()
	if mixed {
		name += " (mixed)"
	}
	return name, all
}

// result computes the figures; it sorts the latency samples.
func (t *tally) result() ScenarioResult {
	res := ScenarioResult{Scenario: t.scenario, Errors: maps.Clone(t.errors), ServerHandshakes: -1, Rounds: len(t.rounds), StoppedEarly: t.stoppedEarly}
	res.Requested = t.scenario.Name
	res.Name, res.Negotiated = t.name()
	res.WindowSeconds = t.window.Seconds()
	res.Handshakes = int64(len(t.handshakes))
	res.Resumed = t.resumed
	res.FullHandshakes = res.Handshakes - res.Resumed
	for _, n := range t.errors {
		res.ErrorCount += n
	}
	if res.WindowSeconds > 0 {
		res.HandshakesPerSec = float64(res.Handshakes) / res.WindowSeconds
	}
	res.Latency = summarize(t.handshakes)
	if t.request {
		res.Requests = int64(len(t.requests))
		st := summarize(t.requests)
		res.RequestLatency = &st
	}
	if t.cpuKnown {
		res.ServerCPUSeconds = t.serverCPU.Seconds()
		res.HandshakesPerServerCPUSecond = t.perServerCPUSecond()
		if t.serverCores > 0 && res.WindowSeconds > 0 {
			res.ServerBusy = res.ServerCPUSeconds / res.WindowSeconds / float64(t.serverCores)
		}
		res.ServerHandshakes = t.serverHandshakes
		if len(t.rounds) > 1 {
			res.RoundHandshakesPerServerCPUSecond = t.rounds
		}
	}
	res.LoadCPUSeconds = t.loadCPU.Seconds()
	if res.WindowSeconds > 0 {
		res.LoadBusy = res.LoadCPUSeconds / res.WindowSeconds / float64(max(t.loadCPUs, 1))
	}
	return res
}
