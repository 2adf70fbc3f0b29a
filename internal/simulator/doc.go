// Package simulator is a simulator of agent pools: it replays workloads in
// virtual time through the product's own code, for benchmarks. A simulated
// pool is runtime pods (the real engine on the sim executor, each with its
// program table) and the controller's fleet loop; requests reach a pod
// through the same gate the HTTP server calls (programs.Gate) and
// placements through the same function the control API calls
// (programs.Table.ApplyPlacement), so the numbers describe the product,
// not a copy of it. It also replays the ShareGPT-shaped request stream
// that compares continuous with static batching on one replica.
package simulator
