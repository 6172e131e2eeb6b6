# SPDX-License-Identifier: Apache-2.0
"""A gRPC caller built only from Debian's python3-grpcio and
python3-protobuf, with messages protoc generated from proto/ (and
google.rpc's status and error details) at test time.  Run by Debian's
/usr/bin/python3 (test_grpcio.py starts it).

Reads {target, gen, tls, calls: [{method, request, key, timeout_s}]} as
JSON on stdin (gen: the folder protoc wrote into; metadata: extra
[name, value] pairs a call sends; tls, for a TLS channel:
{ca, cert, key} paths, cert and key for a client certificate); prints one JSON line per call:
{ok: <response, proto3 JSON with proto field names>, route: the answer's
plimsoll-route} or {error: {code,
message, details: [<google.rpc.ErrorInfo>]}}, as grpcio gave them; a
server-streaming call's line has {stream: [<each message, in order>]} and,
when it ended in an error, that error.
"""
import json
import sys


def main():
    cfg = json.load(sys.stdin)
    sys.path.insert(0, cfg["gen"])
    import grpc
    from google.protobuf import json_format
    from google.rpc import error_details_pb2, status_pb2
    from plimsoll.v1 import sandbox_pb2

    service = sandbox_pb2.DESCRIPTOR.services_by_name["SandboxService"]
    tls = cfg.get("tls")
    if tls:
        read = lambda k: open(tls[k], "rb").read() if tls.get(k) else None  # noqa: E731
        creds = grpc.ssl_channel_credentials(read("ca"), read("key"), read("cert"))
        channel = grpc.secure_channel(cfg["target"], creds)
    else:
        channel = grpc.insecure_channel(cfg["target"])
    for call in cfg["calls"]:
        m = service.methods_by_name[call["method"]]
        req_cls = getattr(sandbox_pb2, m.input_type.name)
        resp_cls = getattr(sandbox_pb2, m.output_type.name)
        kind = channel.unary_stream if m.server_streaming else channel.unary_unary
        stub = kind("/plimsoll.v1.SandboxService/" + m.name,
                    request_serializer=req_cls.SerializeToString,
                    response_deserializer=resp_cls.FromString)
        md = [("authorization", "Bearer " + call["key"])] if call.get("key") else []
        md += [tuple(kv) for kv in call.get("metadata", ())]
        line = {}
        try:
            req = json_format.ParseDict(call.get("request") or {}, req_cls())
            if m.server_streaming:
                line["stream"] = []
                for resp in stub(req, metadata=md, timeout=call.get("timeout_s")):
                    line["stream"].append(json_format.MessageToDict(
                        resp, preserving_proto_field_name=True))
            else:
                resp, c = stub.with_call(req, metadata=md, timeout=call.get("timeout_s"))
                line = {"ok": json_format.MessageToDict(resp, preserving_proto_field_name=True)}
                for k, v in c.initial_metadata() or ():
                    if k == "plimsoll-route":
                        line["route"] = v
        except grpc.RpcError as e:
            details = []
            for k, v in e.trailing_metadata() or ():
                if k == "grpc-status-details-bin":
                    st = status_pb2.Status.FromString(v)
                    for a in st.details:
                        info = error_details_pb2.ErrorInfo()
                        if a.Unpack(info):
                            details.append(json_format.MessageToDict(
                                info, preserving_proto_field_name=True))
            line["error"] = {"code": e.code().name.lower(), "message": e.details(),
                             "details": details}
        print(json.dumps(line), flush=True)
    channel.close()


if __name__ == "__main__":
    main()
