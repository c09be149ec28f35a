#!/usr/bin/env python3
"""Flat top 20 (self samples by leaf symbol) and a split by stage of a sampled profile.

Input: the text of `perf script --no-inline -F comm,tid,ip,sym -i FILE.data` (one file per
argument; their samples are added up). A sample counts as allocation when its leaf-most frames
are the allocator's, as a page fault when the kernel is zeroing or mapping a new page for it,
and otherwise as the stage of the first frame, leaf to root, that one of STAGES matches.
docs/benchmarks.md, "Where the sync time goes (profile)", has the commands that record the
profiles.
"""
import re, sys, collections

ALLOC = re.compile(r'^(malloc|__libc_malloc|_int_malloc|_int_free|cfree|free|__libc_free|realloc|_int_realloc|__libc_realloc|sysmalloc|malloc_consolidate|unlink_chunk|tcache_|__rust_alloc|__rust_dealloc|__rust_realloc|alloc::alloc::|__rdl_|_int_memalign|__memalign|alloc_perturb|systrim|__default_morecore|__brk|brk|__sbrk|sbrk|mmap|munmap|__munmap|__mmap|madvise|__madvise|arena_get2|tcache_init|memset)')
# ordered: the first stage whose pattern matches a frame, leaf to root, names the sample
STAGES = [
    ('handler dispatch (processor, listeners)', re.compile(r'kcache_informer::(processor|listener)|kcache_ring_buffer')),
    ('DeltaFIFO / in-order FIFO', re.compile(r'kcache_delta_fifo')),
    ('indexer / store', re.compile(r'kcache_store|kube_runtime::reflector::store|kube_runtime::reflector::')),
    ('decode: protobuf', re.compile(r'kcache_protobuf')),
    ('decode: JSON', re.compile(r'serde_json|serde_core|serde::|k8s_openapi.*(Deserialize|Visitor|deserialize)|kcache_reflector::(list_decode|watch_decode|strip)|ValueEnd|from_utf8|jiff|memchr')),
    ('reflector (temporary store, keys, events)', re.compile(r'kcache_reflector::reflector|kcache_store::kube|kube_runtime::watcher|kube_runtime::utils')),
    ('HTTP / body (hyper, socket reads)', re.compile(r'hyper|h2::|http_body|tcp_|sock_|__sys_recv|__sys_send|kube_client::client::body|tokio_util::codec|kcache_reflector::frame|kube_client::client::Client::request_events|reqwest|tower')),
    ('thread hand-offs (wake, park, channels)', re.compile(r'tokio::sync|tokio::runtime::(park|scheduler)|futex|schedule|__schedule|try_to_wake_up|wake_up|epoll|parking_lot|std::sys::.*futex|crossbeam|kcache_reflector::decode_thread')),
]

def frames_of(lines):
    out = []
    for l in lines:
        parts = l.strip().split(None, 1)
        out.append(parts[1] if len(parts) == 2 else '[unknown]')
    return out

def samples(path):
    cur = None; fr = []
    for line in open(path, errors='replace'):
        if not line.strip():
            if cur is not None: yield cur, frames_of(fr)
            cur = None; fr = []
        elif line[0] in ' \t':
            fr.append(line)
        else:
            cur = line.split()[0]
    if cur is not None: yield cur, frames_of(fr)

flat = collections.Counter(); stage = collections.Counter(); total = 0
for path in sys.argv[1:]:
    for comm, fr in samples(path):
        total += 1
        leaf = fr[0] if fr else '[unknown]'
        flat[leaf] += 1
        kernel_pf = any(re.search(r'exc_page_fault|do_anonymous_page|clear_page', f) for f in fr[:12])
        # allocation: the leaf-most frames are the allocator's (or the kernel's page faults under it)
        if ALLOC.match(leaf) or (fr and any(ALLOC.match(f) for f in fr[:8]) and all(ALLOC.match(f) or re.match(r'^[a-z_0-9.]+$', f) for f in fr[:next((i for i,f in enumerate(fr) if ALLOC.match(f)), 0)])):
            stage['allocation / free (malloc, free, their page faults)'] += 1; continue
        if kernel_pf:
            name = 'page faults (first touch of new memory)'
            stage[name] += 1; continue
        hit = next(((name) for f in fr for name, pat in STAGES if pat.search(f)), None)
        if hit:
            stage[hit] += 1
        else:
            if any('drop_in_place' in f or 'Drop>::drop' in f for f in fr[:3]):
                stage['other drops'] += 1
            else:
                stage['other: ' + leaf[:60]] += 1

print(f'samples: {total}')
print('\nflat top 20 (self):')
for s, n in flat.most_common(20):
    print(f'{100*n/total:5.1f}%  {s[:110]}')
print('\nby stage:')
other = 0
for s, n in stage.most_common():
    if s.startswith('other: '):
        other += n; continue
    print(f'{100*n/total:5.1f}%  {s}')
print(f'{100*other/total:5.1f}%  other (unclassified leaves)')
