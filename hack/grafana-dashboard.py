#!/usr/bin/env python3
"""Writes config/grafana/kvpilot-dashboard.json, the Grafana dashboard for
kvpilot's pools, pods and programs.

Regenerate after editing this file (`make verify` fails on a stale one):

    make grafana-dashboard

The dashboard reads two sources, both through the monitors in
config/prometheus: the runtime pods (vLLM's metric names and kvpilot_*,
labelled namespace/pool/pod by the PodMonitor's relabeling) and the manager
(the fleet loop's kvpilot_* series, which carry namespace/pool/pod
themselves). TestDashboardMetricsExist in internal/controller checks every
metric a query names against a real runtime's /metrics and the manager's
registry.
"""
import json
import sys

# Selectors: a runtime pod's series, and the manager's per-pool and per-pod
# series.
POD = 'namespace=~"$namespace", pool=~"$pool", pod=~"$pod"'
POOL = 'namespace=~"$namespace", pool=~"$pool"'
RATE = "[$__rate_interval]"

DS = {"type": "prometheus", "uid": "${datasource}"}

panels = []
y = 0
next_id = 1


def row(title):
    global y, next_id
    panels.append({"id": next_id, "type": "row", "title": title, "collapsed": False,
                   "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}, "panels": []})
    next_id += 1
    y += 1


_x = 0


def panel(title, description, unit, targets, width=8, kind="timeseries", stack=False, minimum=None, maximum=None):
    """Adds a panel; three 8-wide panels fill a line."""
    global y, _x, next_id
    if _x + width > 24:
        _x = 0
        y += 8
    defaults = {"unit": unit}
    if kind == "timeseries":
        defaults["custom"] = {"fillOpacity": 10, "showPoints": "never"}
    if stack and kind == "timeseries":
        defaults["custom"]["stacking"] = {"mode": "normal", "group": "A"}
    if minimum is not None:
        defaults["min"] = minimum
    if maximum is not None:
        defaults["max"] = maximum
    p = {
        "id": next_id,
        "type": kind,
        "title": title,
        "description": description,
        "datasource": DS,
        "gridPos": {"h": 8, "w": width, "x": _x, "y": y},
        "fieldConfig": {"defaults": defaults, "overrides": []},
        "options": OPTIONS[kind],
        "targets": [{"refId": chr(ord("A") + i), "datasource": DS, "expr": expr, "legendFormat": legend,
                     "range": True}
                    for i, (expr, legend) in enumerate(targets)],
    }
    panels.append(p)
    next_id += 1
    _x += width


OPTIONS = {
    "timeseries": {"legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
                   "tooltip": {"mode": "multi", "sort": "desc"}},
    "stat": {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
             "colorMode": "value", "graphMode": "area", "justifyMode": "auto", "orientation": "auto",
             "textMode": "value_and_name"},
}


def end_row():
    global y, _x
    if _x:
        y += 8
        _x = 0


def quantiles(metric, sel, by="pool"):
    return [(f'histogram_quantile({q}, sum by ({by}, le) (rate({metric}_bucket{{{sel}}}{RATE})))',
             f"p{int(q * 100)} {{{{{by}}}}}") for q in (0.5, 0.99)]


row("Pools")
panel("Model ready",
      "1 once every pod of a pool has fetched the model of its source.url (the pool's ModelReady condition: "
      "kvpilot_pool_model_ready); 0 while pods fetch it or a fetch failed (kubectl describe kvpool says which). "
      "Pools without a source.url have no series.",
      "none",
      [(f'max by (pool) (kvpilot_pool_model_ready{{{POOL}}})', "{{pool}}")], width=4, kind="stat", minimum=0, maximum=1)
panel("Model download",
      "How much of the model of its source.url a pool's downloading pods have (status.model.downloadPercent: "
      "kvpilot_pool_model_download_bytes, done over total, summed over the pods that report progress). "
      "No series while no pod downloads.",
      "percentunit",
      [(f'max by (pool) (kvpilot_pool_model_download_bytes{{{POOL}, kind="done"}})'
        f' / max by (pool) (kvpilot_pool_model_download_bytes{{{POOL}, kind="total"}})', "{{pool}}")],
      width=5, kind="stat", minimum=0, maximum=1)
panel("Ready replicas",
      "Ready runtime pods of each pool over its desired replicas (kvpilot_pool_replicas).",
      "short",
      [(f'max by (pool) (kvpilot_pool_replicas{{{POOL}, state="ready"}})', "ready {{pool}}"),
       (f'max by (pool) (kvpilot_pool_replicas{{{POOL}, state="desired"}})', "desired {{pool}}")],
      width=5, kind="stat")
panel("Requests running",
      "Requests in the pods' batches, per pool (vllm:num_requests_running).",
      "short",
      [(f'sum by (pool) (vllm:num_requests_running{{{POD}}})', "{{pool}}")], width=5, kind="stat")
panel("KV cache use",
      "Mean device KV-cache use of each pool's pods (vllm:kv_cache_usage_perc).",
      "percentunit",
      [(f'avg by (pool) (vllm:kv_cache_usage_perc{{{POD}}})', "{{pool}}")], width=5, kind="stat",
      minimum=0, maximum=1)
end_row()

row("Traffic")
panel("Requests/s by status",
      "HTTP requests the runtime pods answered on the API routes, by status code (kvpilot_http_requests_total).",
      "reqps",
      [(f'sum by (pool, code) (rate(kvpilot_http_requests_total{{{POD}, path=~"/v1/.+"}}{RATE}))',
        "{{pool}} {{code}}")])
panel("Finished requests/s by reason",
      "Requests the engine finished, by finish reason: stop, length, abort, error (vllm:request_success_total).",
      "reqps",
      [(f'sum by (pool, finished_reason) (rate(vllm:request_success_total{{{POD}}}{RATE}))',
        "{{pool}} {{finished_reason}}")])
panel("Tokens/s",
      "Tokens generated and prompt tokens prefilled per second (vllm:generation_tokens_total, vllm:prompt_tokens_total).",
      "short",
      [(f'sum by (pool) (rate(vllm:generation_tokens_total{{{POD}}}{RATE}))', "generated {{pool}}"),
       (f'sum by (pool) (rate(vllm:prompt_tokens_total{{{POD}}}{RATE}))', "prompt {{pool}}")])
panel("Time to first token",
      "p50 and p99 of the time from a request's arrival to its first token (vllm:time_to_first_token_seconds).",
      "s", quantiles("vllm:time_to_first_token_seconds", POD))
panel("Inter-token latency",
      "p50 and p99 of the time between two tokens of a stream (vllm:inter_token_latency_seconds).",
      "s", quantiles("vllm:inter_token_latency_seconds", POD))
panel("End-to-end request latency",
      "p50 and p99 of a request's time from arrival to its last token (vllm:e2e_request_latency_seconds).",
      "s", quantiles("vllm:e2e_request_latency_seconds", POD))
panel("Running and waiting requests",
      "Requests in the batch, waiting for a slot, and held out of the batch while their KV is copied back "
      "from host memory (vllm:num_requests_running, vllm:num_requests_waiting, kvpilot_num_requests_loading).",
      "short",
      [(f'sum by (pool) (vllm:num_requests_running{{{POD}}})', "running {{pool}}"),
       (f'sum by (pool) (vllm:num_requests_waiting{{{POD}}})', "waiting {{pool}}"),
       (f'sum by (pool) (kvpilot_num_requests_loading{{{POD}}})', "loading {{pool}}")])
panel("Queue time",
      "p50 and p99 of the time requests waited for a slot in the batch (vllm:request_queue_time_seconds).",
      "s", quantiles("vllm:request_queue_time_seconds", POD))
panel("Preemptions/s",
      "Requests the engine preempted to free KV blocks (vllm:num_preemptions_total).",
      "short",
      [(f'sum by (pool) (rate(vllm:num_preemptions_total{{{POD}}}{RATE}))', "{{pool}}")])
end_row()

row("KV cache")
panel("KV cache use by tier",
      "Fraction of each pod's KV blocks in use: device (vllm:kv_cache_usage_perc) and the host-memory tier "
      "(kvpilot_kv_host_blocks_used / kvpilot_kv_host_blocks; absent on pods without one).",
      "percentunit",
      [(f'max by (pod) (vllm:kv_cache_usage_perc{{{POD}}})', "device {{pod}}"),
       (f'sum by (pod) (kvpilot_kv_host_blocks_used{{{POD}}}) / (sum by (pod) (kvpilot_kv_host_blocks{{{POD}}}) > 0)',
        "host {{pod}}")],
      minimum=0, maximum=1)
panel("Prefix cache hit rate",
      "Prompt tokens found in the prefix cache over tokens looked up (vllm:prefix_cache_hits_total / "
      "vllm:prefix_cache_queries_total), and the share served from the host tier (kvpilot_prefix_cache_host_hits_total).",
      "percentunit",
      [(f'sum by (pool) (rate(vllm:prefix_cache_hits_total{{{POD}}}{RATE})) / '
        f'(sum by (pool) (rate(vllm:prefix_cache_queries_total{{{POD}}}{RATE})) > 0)', "all tiers {{pool}}"),
       (f'sum by (pool) (rate(kvpilot_prefix_cache_host_hits_total{{{POD}}}{RATE})) / '
        f'(sum by (pool) (rate(vllm:prefix_cache_queries_total{{{POD}}}{RATE})) > 0)', "host tier {{pool}}")],
      minimum=0, maximum=1)
panel("KV blocks moved to and from host memory",
      "Blocks/s offloaded (GPU_to_CPU) and restored (CPU_to_GPU) between device and host memory "
      "(kvpilot_kv_offload_blocks_total), and those spilled because the device evicted them (kvpilot_kv_spilled_blocks_total).",
      "short",
      [(f'sum by (pool, transfer_type) (rate(kvpilot_kv_offload_blocks_total{{{POD}}}{RATE}))',
        "{{pool}} {{transfer_type}}"),
       (f'sum by (pool) (rate(kvpilot_kv_spilled_blocks_total{{{POD}}}{RATE}))', "{{pool}} spilled")])
panel("KV placed vs capacity per pod",
      "Tokens the fleet loop's placement charges each pod with (its programs' KV plus headroom) over the pod's "
      "KV capacity (kvpilot_pod_kv_placed_tokens / kvpilot_pod_kv_capacity_tokens, from the manager).",
      "percentunit",
      [(f'kvpilot_pod_kv_placed_tokens{{{POD}}} / (kvpilot_pod_kv_capacity_tokens{{{POD}}} > 0)', "{{pod}}")],
      minimum=0)
end_row()

row("Programs and placement")
panel("Programs by state",
      "Agent programs of each pool placed on a pod (active) or waiting for room (paused), from the manager's "
      "fleet loop (kvpilot_programs), and requests the pods hold while their program is paused (kvpilot_held_requests).",
      "short",
      [(f'sum by (pool, state) (kvpilot_programs{{{POOL}}})', "{{pool}} {{state}}"),
       (f'sum by (pool) (kvpilot_held_requests{{{POD}}})', "{{pool}} held requests")])
panel("Longest pause wait",
      "How long the longest-waiting paused program of each pool has waited (kvpilot_program_oldest_wait_seconds).",
      "s",
      [(f'max by (pool) (kvpilot_program_oldest_wait_seconds{{{POOL}}})', "{{pool}}")])
panel("Placements",
      "Programs the fleet loop placed (resumes), paused to keep a pod from thrashing, and paused by the fairness "
      "bound, per interval (kvpilot_program_resumes_total, kvpilot_program_pauses_total, "
      "kvpilot_program_fairness_pauses_total).",
      "short",
      [(f'sum by (pool) (increase(kvpilot_program_resumes_total{{{POOL}}}{RATE}))', "resumed {{pool}}"),
       (f'sum by (pool) (increase(kvpilot_program_pauses_total{{{POOL}}}{RATE}))', "paused {{pool}}"),
       (f'sum by (pool) (increase(kvpilot_program_fairness_pauses_total{{{POOL}}}{RATE}))', "fairness {{pool}}")])
panel("Recommended replicas vs replicas",
      "Replicas the fleet loop estimates would run every program without pausing "
      "(kvpilot_pool_recommended_replicas: the autoscaling signal), against the pool's desired and ready "
      "replicas (kvpilot_pool_replicas) and the runtime pods Prometheus scrapes.",
      "short",
      [(f'max by (pool) (kvpilot_pool_recommended_replicas{{{POOL}}})', "recommended {{pool}}"),
       (f'max by (pool, state) (kvpilot_pool_replicas{{{POOL}}})', "{{state}} {{pool}}"),
       (f'count by (pool) (vllm:num_requests_running{{{POOL}}})', "scraped pods {{pool}}")])
panel("Fleet round duration",
      "p50 and p99 of one fleet round of a pool: read every pod, decide, push placements "
      "(kvpilot_fleet_round_duration_seconds).",
      "s", quantiles("kvpilot_fleet_round_duration_seconds", POOL))
panel("Fleet round errors",
      "Fleet rounds that failed, or in which a pod could not be read or sent its placement "
      "(kvpilot_fleet_round_errors_total).",
      "short",
      [(f'sum by (pool) (increase(kvpilot_fleet_round_errors_total{{{POOL}}}{RATE}))', "{{pool}}")])
end_row()

row("Connections and streams")
panel("Stalled streams",
      "Streaming requests cancelled because the client stopped reading, by reason (kvpilot_stream_stalled_total).",
      "short",
      [(f'sum by (pool, reason) (increase(kvpilot_stream_stalled_total{{{POD}}}{RATE}))', "{{pool}} {{reason}}")])
panel("API connections evicted",
      "API connections closed to stay within --max-connections (kvpilot_api_connections_evicted_total).",
      "short",
      [(f'sum by (pool) (increase(kvpilot_api_connections_evicted_total{{{POD}}}{RATE}))', "{{pool}}")])
panel("HTTP latency by route",
      "p99 of the time until the response, or the stream, ends, by route (kvpilot_http_request_duration_seconds).",
      "s",
      [(f'histogram_quantile(0.99, sum by (path, le) (rate(kvpilot_http_request_duration_seconds_bucket{{{POD}}}{RATE})))',
        "p99 {{path}}")])
end_row()


def query_var(name, label, expr, depends):
    q = f"label_values({expr}, {label})"
    return {
        "name": name, "label": label, "type": "query", "datasource": DS,
        # As Grafana 10's Prometheus variable editor saves a label_values
        # query (qryType 1).
        "query": {"qryType": 1, "query": q, "refId": "PrometheusVariableQueryEditor-VariableQuery"},
        "definition": q, "refresh": 2, "multi": True, "includeAll": True, "allValue": ".*",
        "options": [], "regex": "", "hide": 0, "skipUrlSync": False,
        "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
        "sort": 1, "description": depends,
    }


dashboard = {
    "uid": "kvpilot-pools",
    "title": "kvpilot: pools, pods and programs",
    "description": "kvpilot's InferencePools: traffic, latency, KV cache by tier, agent programs and their placement. "
                   "Generated by hack/grafana-dashboard.py.",
    "tags": ["kvpilot", "vllm"],
    "editable": True,
    "graphTooltip": 1,
    "refresh": "30s",
    "schemaVersion": 39,
    "time": {"from": "now-1h", "to": "now"},
    "timezone": "",
    "version": 1,
    "annotations": {"list": []},
    "links": [],
    "templating": {"list": [
        {"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus",
         "current": {}, "hide": 0, "refresh": 1, "regex": ""},
        query_var("namespace", "namespace", "vllm:num_requests_running", "Namespaces with kvpilot runtime pods."),
        query_var("pool", "pool", 'vllm:num_requests_running{namespace=~"$namespace"}', "InferencePools."),
        query_var("pod", "pod", 'vllm:num_requests_running{namespace=~"$namespace", pool=~"$pool"}',
                  "Runtime pods of the selected pools."),
    ]},
    "panels": panels,
}

json.dump(dashboard, sys.stdout, indent=2)
sys.stdout.write("\n")
