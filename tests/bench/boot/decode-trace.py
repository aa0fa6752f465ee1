#!/usr/bin/env python3
"""Turns a packet capture of one NFSv3 client's boot into the boot storm's trace.

    decode-trace.py PCAP NFS_PORT MOUNT_PORT BASE_DIR END_NAME > trace.txt

PCAP is `tcpdump -i lo -w` of the server's NFS and MOUNT ports (TCP, IPv4), taken while one
client booted; BASE_DIR is the tree the server exported as its lower branch; END_NAME is the
name whose first LOOKUP marks the end of the boot (the recording makes the booted system look
it up; nothing after it is kept).

Handles become paths relative to the export root: the root's handle from the MNT reply, every
other from the replies that hand one out (LOOKUP, CREATE, MKDIR, SYMLINK, READDIRPLUS
entries). The trace (see tests/bench/boot/README) lists first the tree the calls need, taken
from BASE_DIR (every path a call names and every entry of every directory listed), then the
calls in the order the client sent them, each with the microseconds since the one before.
Only the Python standard library is used.
"""
import os
import stat
import struct
import sys

NFS_PROG, MOUNT_PROG = 100003, 100005
PROCS = {0: "NULL", 1: "GETATTR", 2: "SETATTR", 3: "LOOKUP", 4: "ACCESS", 5: "READLINK",
         6: "READ", 7: "WRITE", 8: "CREATE", 9: "MKDIR", 10: "SYMLINK", 11: "MKNOD",
         12: "REMOVE", 13: "RMDIR", 14: "RENAME", 15: "LINK", 16: "READDIR",
         17: "READDIRPLUS", 18: "FSSTAT", 19: "FSINFO", 20: "PATHCONF", 21: "COMMIT"}
FATTR3_BYTES = 84


def esc(path):
    """Percent-encodes what would break a space-separated line (and '%' itself)."""
    out = []
    for b in path.encode("utf-8", "surrogateescape"):
        out.append(chr(b) if 0x21 <= b <= 0x7e and b != 0x25 else "%%%02X" % b)
    return "".join(out)


def unesc(field):
    """The path esc() wrote."""
    b, i = bytearray(), 0
    while i < len(field):
        if field[i] == "%":
            b.append(int(field[i + 1:i + 3], 16))
            i += 3
        else:
            b.append(ord(field[i]))
            i += 1
    return b.decode("utf-8", "surrogateescape")


class Xdr:
    def __init__(self, data, pos=0):
        self.d, self.p = data, pos

    def u32(self):
        v = struct.unpack_from(">I", self.d, self.p)[0]
        self.p += 4
        return v

    def u64(self):
        v = struct.unpack_from(">Q", self.d, self.p)[0]
        self.p += 8
        return v

    def opaque(self):
        n = self.u32()
        v = self.d[self.p:self.p + n]
        self.p += (n + 3) & ~3
        return v

    def string(self):
        return self.opaque().decode("utf-8", "surrogateescape")

    def skip(self, n):
        self.p += n

    def post_op_attr(self):
        if self.u32():
            self.skip(FATTR3_BYTES)

    def post_op_fh(self):
        return self.opaque() if self.u32() else None

    def sattr3(self):
        """-> (mode or None, size or None); times are skipped."""
        mode = self.u32() if self.u32() else None
        for _ in range(2):  # uid, gid
            if self.u32():
                self.u32()
        size = self.u64() if self.u32() else None
        for _ in range(2):  # atime, mtime: DONT_CHANGE, SET_TO_SERVER_TIME, SET_TO_CLIENT_TIME
            if self.u32() == 2:
                self.skip(8)
        return mode, size


def pcap_packets(path):
    """Yields (time in us, src, sport, dst, dport, seq, payload) of IPv4 TCP packets."""
    with open(path, "rb") as f:
        data = f.read()
    magic = struct.unpack_from("<I", data, 0)[0]
    if magic in (0xa1b2c3d4, 0xa1b23c4d):
        end = "<"
    elif magic in (0xd4c3b2a1, 0x4d3cb2a1):
        end = ">"
    else:
        sys.exit("decode-trace: %s is no pcap file (tcpdump -w writes one)" % path)
    nano = magic in (0xa1b23c4d, 0x4d3cb2a1)
    link = struct.unpack_from(end + "I", data, 20)[0]
    link_hdr = {1: 14, 0: 4, 113: 16, 276: 20}.get(link)
    if link_hdr is None:
        sys.exit("decode-trace: link type %d; capture on lo (tcpdump -i lo)" % link)
    pos = 24
    while pos + 16 <= len(data):
        sec, frac, incl, _ = struct.unpack_from(end + "IIII", data, pos)
        pos += 16
        pkt = data[pos:pos + incl]
        pos += incl
        ip = pkt[link_hdr:]
        if len(ip) < 20 or ip[0] >> 4 != 4 or ip[9] != 6:
            continue
        ihl = (ip[0] & 15) * 4
        total = struct.unpack_from(">H", ip, 2)[0]
        tcp = ip[ihl:total]
        sport, dport, seq = struct.unpack_from(">HHI", tcp, 0)
        off = (tcp[12] >> 4) * 4
        payload = tcp[off:]
        if payload:
            us = sec * 1000000 + (frac // 1000 if nano else frac)
            yield us, ip[12:16], sport, ip[16:20], dport, seq, bytes(payload)


def rpc_records(packets):
    """Reassembles each direction's byte stream and yields (time, key, record) per RPC record."""
    streams = {}
    for us, src, sport, dst, dport, seq, payload in packets:
        key = (src, sport, dst, dport)
        st = streams.setdefault(key, {"next": None, "buf": b"", "frags": b""})
        if st["next"] is not None:
            delta = (seq - st["next"]) & 0xffffffff
            if delta >= 0x80000000:  # a retransmission of bytes already seen
                skip = (st["next"] - seq) & 0xffffffff
                if skip >= len(payload):
                    continue
                payload = payload[skip:]
            elif delta:
                sys.exit("decode-trace: a gap in the TCP stream (packets dropped by the "
                         "capture?); capture again with a larger buffer (tcpdump -B)")
        st["next"] = (seq + len(payload)) & 0xffffffff if st["next"] is None else \
            (st["next"] + len(payload)) & 0xffffffff
        st["buf"] += payload
        buf = st["buf"]
        while len(buf) >= 4:
            mark = struct.unpack_from(">I", buf, 0)[0]
            n = mark & 0x7fffffff
            if len(buf) < 4 + n:
                break
            st["frags"] += buf[4:4 + n]
            buf = buf[4 + n:]
            if mark & 0x80000000:
                yield us, key, st["frags"]
                st["frags"] = b""
        st["buf"] = buf


def parse_call(x):
    """After the RPC call header: (prog, vers, proc), the position of the arguments."""
    x.u32()  # rpcvers
    prog, vers, proc = x.u32(), x.u32(), x.u32()
    x.u32(); x.opaque()  # credential
    x.u32(); x.opaque()  # verifier
    return prog, vers, proc


def main():
    if len(sys.argv) != 6:
        sys.exit(__doc__)
    pcap, nfs_port, mount_port, base, end_name = sys.argv[1:]
    nfs_port, mount_port = int(nfs_port), int(mount_port)
    paths = {}        # handle -> path ("/" is the export root)
    pending = {}      # (client's stream, xid) -> (time, prog, proc, call record, arguments' offset)
    calls = []        # (time, fields)
    unknown = {}      # procedure -> calls on a handle no reply named
    dropped = {}      # procedure -> calls of a kind the replay does not make (MKNOD, LINK)
    end_time = None   # when the booted system looked up END_NAME

    def child(dirpath, name):
        if name == ".":
            return dirpath
        if name == "..":
            return dirpath.rsplit("/", 1)[0] or "/"
        return "/" + name if dirpath == "/" else dirpath + "/" + name

    def renamed(old, new):
        for fh, p in list(paths.items()):
            if p == old:
                paths[fh] = new
            elif p.startswith(old + "/"):
                paths[fh] = new + p[len(old):]

    for us, key, rec in rpc_records(pcap_packets(pcap)):
        x = Xdr(rec)
        xid, mtype = x.u32(), x.u32()
        src, sport, dst, dport = key
        if mtype == 0:
            if dport in (nfs_port, mount_port):
                prog, vers, proc = parse_call(x)
                pending[(key, xid)] = (us, prog, vers, proc, rec, x.p)
            continue
        call = pending.pop(((dst, dport, src, sport), xid), None)
        if call is None:
            continue
        t, prog, vers, proc, crec, apos = call
        if x.u32() != 0:  # MSG_DENIED
            continue
        x.u32(); x.opaque()  # verifier
        if x.u32() != 0:  # not SUCCESS
            continue
        a = Xdr(crec, apos)
        if prog == MOUNT_PROG:
            if proc == 1 and vers == 3 and x.u32() == 0:  # MNT
                paths[x.opaque()] = "/"
            continue
        if prog != NFS_PROG or vers != 3 or proc == 0:
            continue
        name = PROCS.get(proc, "PROC%d" % proc)
        if proc in (11, 15) or proc not in PROCS:
            dropped[name] = dropped.get(name, 0) + 1
            continue
        status = x.u32()
        if proc in (8, 9, 10, 11, 12, 13, 3):  # the first argument is a directory + name
            dirp = paths.get(a.opaque())
            nm = a.string()
            if dirp is None:
                unknown[name] = unknown.get(name, 0) + 1
                continue
            path = child(dirp, nm)
            f = [name, esc(path)]
            if proc == 3:
                if nm == end_name:
                    end_time = t if end_time is None else min(end_time, t)
                    continue
                f.append(str(status))
                if status == 0:
                    paths[x.opaque()] = path
            elif proc == 8:
                how = a.u32()
                mode = a.sattr3()[0] if how in (0, 1) else None
                f += ["-" if mode is None else "%o" % mode, str(how)]
            elif proc == 9:
                mode = a.sattr3()[0]
                f.append("-" if mode is None else "%o" % mode)
            elif proc == 10:
                a.sattr3()
                f.append(esc(a.string()))
            if proc in (8, 9, 10) and status == 0:
                fh = x.post_op_fh()
                if fh is not None:
                    paths[fh] = path
            calls.append((t, f))
            continue
        fh = a.opaque()
        path = paths.get(fh)
        if path is None:
            unknown[name] = unknown.get(name, 0) + 1
            continue
        f = [name, esc(path)]
        if proc == 4:
            f.append(str(a.u32()))
        elif proc == 2:
            mode, size = a.sattr3()
            f += ["-" if mode is None else "%o" % mode, "-" if size is None else str(size)]
        elif proc in (6, 21):
            f += [str(a.u64()), str(a.u32())]
        elif proc == 7:
            f += [str(a.u64()), str(a.u32()), str(a.u32())]
        elif proc == 14:
            fromname = a.string()
            todir = paths.get(a.opaque())
            toname = a.string()
            if todir is None:
                unknown[name] = unknown.get(name, 0) + 1
                continue
            old, new = child(path, fromname), child(todir, toname)
            f = [name, esc(old), esc(new)]
            if status == 0:
                renamed(old, new)
        elif proc in (16, 17):
            cookie = a.u64()
            a.skip(8)
            counts = [a.u32()] if proc == 16 else [a.u32(), a.u32()]
            if proc == 17 and status == 0:
                x.post_op_attr()
                x.skip(8)
                while x.u32():
                    x.u64()
                    nm = x.string()
                    x.u64()
                    x.post_op_attr()
                    efh = x.post_op_fh()
                    if efh is not None and nm not in (".", ".."):
                        paths[efh] = child(path, nm)
                    elif efh is not None and nm == "." and efh not in paths:
                        paths[efh] = path
            if cookie:  # the replay lists a directory whole from its start
                continue
            f += [str(c) for c in counts]
        calls.append((t, f))

    if not calls:
        sys.exit("decode-trace: no NFSv3 call in %s on port %d (wrong port, or no MNT seen?)"
                 % (pcap, nfs_port))
    if end_time is None:
        print("decode-trace: no LOOKUP of %s: the whole capture is kept" % end_name,
              file=sys.stderr)
    else:
        calls = [c for c in calls if c[0] < end_time]
    calls.sort(key=lambda c: c[0])

    # The tree: every path a call names, their parents, and what listed directories hold.
    raw = set()
    for _, f in calls:
        raw.add(unesc(f[1]))
        if f[0] == "RENAME":
            raw.add(unesc(f[2]))
    for d in {unesc(f[1]) for _, f in calls if f[0] in ("READDIR", "READDIRPLUS")}:
        try:
            for nm in os.listdir(base + d):
                raw.add(child(d, nm))
        except OSError:
            pass
    for p in list(raw):
        while p not in ("/", ""):
            p = p.rsplit("/", 1)[0] or "/"
            raw.add(p)
    tree = []
    for p in sorted(raw):
        try:
            st = os.lstat(base + p if p != "/" else base)
        except OSError:
            continue  # a name the boot looked up in vain, or made itself
        mode = "%o" % stat.S_IMODE(st.st_mode)
        if stat.S_ISDIR(st.st_mode):
            tree.append("d %s %s" % (mode, esc(p)))
        elif stat.S_ISREG(st.st_mode):
            tree.append("f %s %d %s" % (mode, st.st_size, esc(p)))
        elif stat.S_ISLNK(st.st_mode):
            tree.append("l %s %s" % (esc(p), esc(os.readlink(base + p))))

    print("# boot storm trace (tests/bench/boot/README): %d tree entries, %d calls"
          % (len(tree), len(calls)))
    if unknown:
        print("# left out, on handles no reply named: " +
              " ".join("%s=%d" % kv for kv in sorted(unknown.items())))
    if dropped:
        print("# left out, procedures the replay does not make: " +
              " ".join("%s=%d" % kv for kv in sorted(dropped.items())))
    for line in tree:
        print(line)
    prev = calls[0][0]
    for t, f in calls:
        print("c %d %s" % (t - prev, " ".join(f)))
        prev = t


if __name__ == "__main__":
    main()
