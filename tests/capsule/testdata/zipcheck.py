"""Python's view of a zip, for the capsule tests (Ray unpacks capsules with Python's zipfile).

  zipcheck.py extract ZIP DEST     extractall into DEST; print every entry's metadata as JSON,
                                   plus what Ray's top-level-directory check returns
  zipcheck.py make ZIP SPEC.json   write a zip from [{"name", "data", "attr"?, "method"?}]
  zipcheck.py replace ZIP OUT NAME DATA
                                   copy ZIP to OUT with entry NAME's data replaced (or added)
  zipcheck.py drop ZIP OUT NAME    copy ZIP to OUT without entry NAME
  zipcheck.py path-order ZIP OUT   copy ZIP to OUT with its entries in plain path order (format 2)
"""
import json
import struct
import sys
import zipfile

MAC_OS_ZIP_HIDDEN_DIR_NAME = "__MACOSX"


def ray_top_level_dir(path):
    # ray/_private/runtime_env/packaging.py get_top_level_dir_from_compressed_package
    package_zip = zipfile.ZipFile(path, "r")
    top_level_directory = None

    def is_top_level_file(file_name):
        return "/" not in file_name

    def base_dir_name(file_name):
        return file_name.split("/")[0]

    for file_name in package_zip.namelist():
        if top_level_directory is None:
            if is_top_level_file(file_name):
                return None
            dir_name = base_dir_name(file_name)
            if dir_name == MAC_OS_ZIP_HIDDEN_DIR_NAME:
                continue
            top_level_directory = dir_name
        elif is_top_level_file(file_name) or base_dir_name(file_name) not in [
            top_level_directory,
            MAC_OS_ZIP_HIDDEN_DIR_NAME,
        ]:
            return None
    return top_level_directory


def local_extra_len(raw, offset):
    sig, = struct.unpack_from("<I", raw, offset)
    assert sig == 0x04034B50, "bad local header signature"
    name_len, extra_len = struct.unpack_from("<HH", raw, offset + 26)
    return extra_len


def extract(path, dest):
    raw = open(path, "rb").read()
    with zipfile.ZipFile(path) as z:
        bad = z.testzip()
        infos = []
        for zi in z.infolist():
            infos.append({
                "name": zi.filename,
                "date_time": list(zi.date_time),
                "extra_central": len(zi.extra),
                "extra_local": local_extra_len(raw, zi.header_offset),
                "external_attr": zi.external_attr,
                "create_system": zi.create_system,
                "compress_type": zi.compress_type,
                "flag_bits": zi.flag_bits,
                "comment": len(zi.comment),
            })
        z.extractall(dest)
        print(json.dumps({
            "testzip": bad,
            "comment": len(z.comment),
            "infos": infos,
            "ray_top_level_dir": ray_top_level_dir(path),
        }))


def make(path, spec_path):
    spec = json.load(open(spec_path))
    with zipfile.ZipFile(path, "w") as z:
        for e in spec:
            zi = zipfile.ZipInfo(e["name"], date_time=(1980, 1, 1, 0, 0, 0))
            zi.compress_type = zipfile.ZIP_DEFLATED if e.get("method") == "deflate" else zipfile.ZIP_STORED
            if "attr" in e:
                zi.create_system = 3
                zi.external_attr = e["attr"] << 16
            z.writestr(zi, e.get("data", "").encode() * e.get("repeat", 1))


def copy(src, out, name, data):
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(out, "w") as zout:
        done = False
        for zi in zin.infolist():
            if zi.filename == name:
                done = True
                if data is None:
                    continue
                zout.writestr(zi, data)
            else:
                zout.writestr(zi, zin.read(zi))
        if not done and data is not None:
            zout.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), data)


def path_order(src, out):
    """The same entries in plain byte order of their names: format 2's order, where
    .starforge/ sorts among the user's files."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(out, "w") as zout:
        for zi in sorted(zin.infolist(), key=lambda i: i.filename.encode()):
            zout.writestr(zi, zin.read(zi))


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "extract":
        extract(sys.argv[2], sys.argv[3])
    elif cmd == "make":
        make(sys.argv[2], sys.argv[3])
    elif cmd == "replace":
        copy(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5].encode())
    elif cmd == "path-order":
        path_order(sys.argv[2], sys.argv[3])
    elif cmd == "drop":
        copy(sys.argv[2], sys.argv[3], sys.argv[4], None)
    else:
        sys.exit("unknown command " + cmd)
