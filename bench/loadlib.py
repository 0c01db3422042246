"""What the control-plane load benchmarks share: a free port, a job's multipart form, percentiles."""

import io
import socket
import uuid
import zipfile


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def code_zip():
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("README.txt", "a tiny job\n")
    return buf.getvalue()


CODE = code_zip()


def job_form(spec_text):
    """POST /api/v1/jobs's body for `spec_text` and a tiny code zip: (body, content type)."""
    boundary = uuid.uuid4().hex
    out = io.BytesIO()
    for name, filename, data, ctype in (("spec", "job.yaml", spec_text.encode(), "application/yaml"),
                                        ("code", "code.zip", CODE, "application/zip")):
        out.write(f"--{boundary}\r\n".encode())
        out.write(f'Content-Disposition: form-data; name="{name}"; filename="{filename}"\r\n'
                  .encode())
        out.write(f"Content-Type: {ctype}\r\n\r\n".encode())
        out.write(data)
        out.write(b"\r\n")
    out.write(f"--{boundary}--\r\n".encode())
    return out.getvalue(), f"multipart/form-data; boundary={boundary}"


def pct(values, p):
    """The p-th percentile (nearest rank) of `values`; NaN when there are none."""
    values = sorted(values)
    if not values:
        return float("nan")
    k = max(0, min(len(values) - 1, int(round(p / 100.0 * (len(values) - 1)))))
    return values[k]
