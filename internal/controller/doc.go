// Package controller holds the kvpilot reconcilers: InferencePool into a
// Deployment of runtime pods, a Service and a PodDisruptionBudget; and
// SchedulerPolicy into its status (the pools that use it). Beside them the
// leader runs the FleetLoop, a manager Runnable that places agent programs
// across each pool's pods (internal/fleet) and records the outcome in the
// pool's status.capacity, in Prometheus and in the pods' deletion costs.
//
// Every child is written with server-side apply under one field manager, so
// a reconcile states the whole desired object and never reads-modifies-
// writes; the API server drops the fields a newer reconcile no longer sets.
package controller
