// Package placement is the program-level scheduler of a pool: given a
// snapshot of the pool's pods and agent programs, it decides which programs
// to place, resume, pause and mark for pause, so that every pod's KV cache
// holds the programs that will use it next instead of thrashing.
//
// A round (Scheduler.Decide) is a pure function of the Policy, the Snapshot
// and the time passed in; it reads no clock and keeps no state between rounds
// except scratch memory. Ties are broken by pod name and program id, so the
// same snapshot, in any order, gives the same Decision.
//
// # One round, ProgramAware mode
//
//  1. Load. Programs on ready, non-draining pods are placed and charged to
//     their pod (see Capacity for the formula). Programs on a draining pod
//     leave it: ACTING ones are paused now and join the waiting programs, so
//     step 3 can resume them elsewhere in the same round (a move); REASONING
//     ones are marked for pause, and the pod pauses them when their request
//     ends. Programs on a pod that is not ready are left where they are and
//     get no actions: the pod still holds their KV cache, and readiness
//     blips are common under load. Paused programs, new ones, and active
//     ones whose pod is not in the snapshot are waiting.
//     With Policy.DeviceOvercommit above 1, a pod with a host KV tier
//     counts as that many times its device capacity, the excess bounded
//     by the tier's room after the KV it keeps for paused programs and
//     holds for ACTING ones; every later step fills to that.
//  2. Force-resume. A program waiting longer than Policy.MaxPauseDuration is
//     placed on the pod with the most remaining capacity, whether it fits or
//     not, longest-waiting first.
//  3. Resume. The other waiting programs are ordered by class (held: a
//     request is waiting and step > 1; then new: step ≤ 1; then idle: ACTING
//     with no request), then by footprint, smallest first, then by id. Each
//     goes to the pod with the most remaining capacity, if it fits there;
//     that pod is re-chosen after every placement. Smallest first, unlike
//     the seed's best-fit decreasing, resumes the most programs the room
//     holds: every running program adds steps, whatever its context, so
//     on the agent scenarios it did more steps a minute (docs/benchmarks.md,
//     "Resume order"), at the cost of a longer wait for the largest, which
//     Policy.ResumeFirstAfter bounds: a program that has waited longer
//     goes ahead of the others of its class.
//     One exception, beyond the seed: a program whose KV cache may still be
//     on a pod (Program.CachedOn, where it last ran) goes back there when it
//     fits, since resuming elsewhere recomputes its whole context; and
//     when it does not fit there, it waits for that pod's room for up to
//     Policy.CacheAffinityWait since it was paused (unless overdue under
//     the fairness bound) rather than being resumed on another pod.
//     Remaining capacity counts ACTING programs decayed when
//     Policy.ActingDecay is enabled, and on a pod with a host KV tier only
//     for the share its host tier cannot hold (Policy.ActingOnHost). A program that fits nowhere stays
//     waiting. Resuming is tried every round whenever capacity is free,
//     with or without decay: no program waits out MaxPauseDuration while a
//     pod has room for it, nor longer than CacheAffinityWait for the pod
//     holding its cache.
//     With Policy.WaitAging, a waiting program moves one class ahead for
//     every WaitAging it has waited (the longer paused, the earlier
//     resumed), and with Policy.FairnessBound, programs that want to run
//     and have waited past the bound come before every class.
//     3b. Fairness (Policy.FairnessBound, off when zero). Each program that
//     wants to run, has waited past the bound and is still waiting, longest
//     first, takes the place of the program that has run longest since its
//     last resume (at least one bound) on the pod that then fits it best:
//     an ACTING one is paused and the waiting program placed now; a
//     REASONING one is marked, so its pod pauses it at its next tool call,
//     never mid-request, and the waiting program takes the room in a later
//     round. Marks already on a pod count as room, so one waiting program
//     claims one victim. This is time-sliced fairness over programs: no
//     program that wants to run waits much longer than the bound while
//     another has run a whole bound.
//  4. Pause until safe. On each serving pod over capacity (undecayed),
//     tokens of programs already marked for pause count as freed first; then
//     ACTING programs are paused, smallest first; then REASONING programs are
//     marked for pause, smallest first; each step stops as soon as the pod is
//     no longer over capacity. Marks the pod no longer needs are dropped,
//     largest first. Programs placed in steps 2 and 3 are never paused in the
//     round that placed them.
//  5. Report: per-pod capacity, the programs still waiting, and a
//     recommended replica count (Decision.RecommendedReplicas).
//
// # Starvation: a waiting program reserves one pod
//
// Lower classes use only the capacity higher classes leave, but they are not
// stopped outright by a higher-class program that does not fit: that would
// let one large program block every new program until its MaxPauseDuration
// passes. Instead, the first program in resume order that fits nowhere now,
// but would fit on an empty serving pod, reserves the serving pod large
// enough for it with the most remaining capacity. Programs of lower classes
// are not placed on the reserved pod in that round, so capacity freed there
// accumulates for the waiting program, while lower classes keep using every
// other pod. Programs of the same class still take the gaps left on other
// pods. A program larger than every pod reserves nothing: only a
// force-resume places it.
//
// # Default mode
//
// Programs stay on their pod (sticky); waiting programs go to the serving pod
// running the fewest programs; nothing is ever paused for capacity. Draining
// pods are emptied as in ProgramAware mode.
package placement
