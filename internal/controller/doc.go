// Package controller holds the kvpilot reconcilers: InferencePool into a
// Deployment of runtime pods, a Service and a PodDisruptionBudget; and
// SchedulerPolicy into its status (the pools that use it).
//
// Every child is written with server-side apply under one field manager, so
// a reconcile states the whole desired object and never reads-modifies-
// writes; the API server drops the fields a newer reconcile no longer sets.
package controller
