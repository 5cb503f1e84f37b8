"""An OTLP receiver built from the official opentelemetry-proto definitions.

It accepts spans and metrics over both OTLP transports and appends one JSON
line per span or metric data point to a file, so a test reads back what each
process exported:

  {"signal": "span", "service": ..., "trace": hex, "span": hex, "parent": hex, "name": ...}
  {"signal": "metric", "service": ..., "name": ..., "value": number, "attributes": {...}}

Usage: python otlp_receiver.py OUT_FILE PORT_FILE
It listens on two loopback ports (gRPC and HTTP/protobuf), writes them to
PORT_FILE as "GRPC_PORT HTTP_PORT", and runs until killed.
"""
import json
import sys
import threading
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import grpc
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2, metrics_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

OUT = sys.argv[1]
LOCK = threading.Lock()


def _write(rows):
    with LOCK, open(OUT, "a", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
        f.flush()


def _service(resource):
    for kv in resource.attributes:
        if kv.key == "service.name":
            return kv.value.string_value
    return ""


def _attrs(kvs):
    out = {}
    for kv in kvs:
        v = kv.value
        out[kv.key] = v.string_value or v.int_value or v.double_value or v.bool_value
    return out


def take_spans(req):
    rows = []
    for rs in req.resource_spans:
        service = _service(rs.resource)
        for ss in rs.scope_spans:
            for s in ss.spans:
                rows.append({
                    "signal": "span",
                    "service": service,
                    "trace": s.trace_id.hex(),
                    "span": s.span_id.hex(),
                    "parent": s.parent_span_id.hex(),
                    "name": s.name,
                })
    _write(rows)


def take_metrics(req):
    rows = []
    for rm in req.resource_metrics:
        service = _service(rm.resource)
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                kind = m.WhichOneof("data")
                points = getattr(m, kind).data_points if kind else []
                for p in points:
                    if kind == "histogram":
                        value = p.count
                    else:
                        value = p.as_int if p.WhichOneof("value") == "as_int" else p.as_double
                    rows.append({
                        "signal": "metric",
                        "service": service,
                        "name": m.name,
                        "value": value,
                        "attributes": _attrs(p.attributes),
                    })
    _write(rows)


class Traces(trace_service_pb2_grpc.TraceServiceServicer):
    def Export(self, request, context):
        take_spans(request)
        return trace_service_pb2.ExportTraceServiceResponse()


class Metrics(metrics_service_pb2_grpc.MetricsServiceServicer):
    def Export(self, request, context):
        take_metrics(request)
        return metrics_service_pb2.ExportMetricsServiceResponse()


class Http(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        if self.path == "/v1/traces":
            req = trace_service_pb2.ExportTraceServiceRequest()
            req.ParseFromString(body)
            take_spans(req)
            reply = trace_service_pb2.ExportTraceServiceResponse()
        elif self.path == "/v1/metrics":
            req = metrics_service_pb2.ExportMetricsServiceRequest()
            req.ParseFromString(body)
            take_metrics(req)
            reply = metrics_service_pb2.ExportMetricsServiceResponse()
        else:
            self.send_response(404)
            self.end_headers()
            return
        data = reply.SerializeToString()
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def main():
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Traces(), server)
    metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(Metrics(), server)
    grpc_port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    http = ThreadingHTTPServer(("127.0.0.1", 0), Http)
    with open(sys.argv[2] + ".tmp", "w", encoding="utf-8") as f:
        f.write(f"{grpc_port} {http.server_address[1]}\n")
    import os

    os.rename(sys.argv[2] + ".tmp", sys.argv[2])
    http.serve_forever()


if __name__ == "__main__":
    main()
