//! The executable files mapped into a process, as the unwinder wants them:
//! each file's address range and load bias from `/proc/PID/maps`, and its
//! unwind sections (`.eh_frame_hdr`, `.eh_frame`, `.debug_frame`, `.text`,
//! `.got`) read from the file with goblin, memory-mapped, not copied.

use std::collections::BTreeMap;
use std::ops::{Deref, Range};
use std::sync::Arc;

use framehop::x86_64::UnwinderX86_64;
use framehop::{ExplicitModuleSectionInfo, Module, Unwinder};
use goblin::container::Ctx;
use goblin::elf::program_header::PT_LOAD;
use goblin::elf::section_header::SHT_NOBITS;
use goblin::elf::{Elf, ProgramHeader, SectionHeader};
use goblin::strtab::Strtab;
use memmap2::Mmap;

/// A section's bytes inside a memory-mapped file.
#[derive(Debug, Clone)]
pub(super) struct Bytes {
    map: Arc<Mmap>,
    range: Range<usize>,
}

impl Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.map[self.range.clone()]
    }
}

/// One line of `/proc/PID/maps` that maps a file.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Mapping {
    start: u64,
    end: u64,
    offset: u64,
    executable: bool,
    path: String,
}

/// One line of `/proc/PID/maps`: its address range, file offset, whether
/// it is executable, and its path (`""` for an anonymous mapping). The one
/// reading of a maps line, for the unwinder's files, the interpreter's
/// ranges and the regions a return address must lie in.
pub(super) fn maps_line(line: &str) -> Option<(Range<u64>, u64, bool, &str)> {
    let mut fields = line.split_whitespace();
    let (start, end) = fields.next()?.split_once('-')?;
    let perms = fields.next()?;
    let offset = u64::from_str_radix(fields.next()?, 16).ok()?;
    let path = fields.nth(2).unwrap_or("");
    let range = u64::from_str_radix(start, 16).ok()?..u64::from_str_radix(end, 16).ok()?;
    Some((range, offset, perms.contains('x'), path))
}

fn parse_maps(maps: &str) -> Vec<Mapping> {
    maps.lines()
        .filter_map(maps_line)
        .filter(|(.., path)| path.starts_with('/'))
        .map(|(range, offset, executable, path)| Mapping {
            start: range.start,
            end: range.end,
            offset,
            executable,
            path: path.to_owned(),
        })
        .collect()
}

/// An unwinder that knows every executable file mapped into `pid` now; a
/// file it cannot read is left out (its frames end the stack there).
pub(super) fn unwinder(pid: u32) -> (UnwinderX86_64<Bytes>, Vec<Range<u64>>) {
    let mut unwinder = UnwinderX86_64::new();
    let mut known = Vec::new();
    add_new(pid, &mut unwinder, &mut known);
    (unwinder, known)
}

/// Adds to `unwinder` the executable files mapped into `pid` since
/// `known` (the address ranges of the files it has) was filled: a library
/// loaded since (a Python extension imported). Returns how many it added.
pub(super) fn add_new(
    pid: u32,
    unwinder: &mut UnwinderX86_64<Bytes>,
    known: &mut Vec<Range<u64>>,
) -> usize {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
    let mut files: BTreeMap<String, Vec<Mapping>> = BTreeMap::new();
    for m in parse_maps(&maps) {
        files.entry(m.path.clone()).or_default().push(m);
    }
    let mut added = 0;
    for (path, maps) in files {
        let is_known = |m: &Mapping| known.iter().any(|r| r.contains(&m.start));
        if !maps.iter().any(|m| m.executable) || maps.iter().any(is_known) {
            continue;
        }
        // Through the process's root, so a container's files are found.
        let file = std::fs::File::open(format!("/proc/{pid}/root{path}"))
            .or_else(|_| std::fs::File::open(&path));
        // SAFETY: the file is mapped read-only; a file changed under the
        // map (an upgrade while it runs) gives wrong frames, not UB in
        // this process's own memory safety as far as the bytes are read
        // as plain data.
        let Ok(map) = file.and_then(|f| unsafe { Mmap::map(&f) }) else {
            continue;
        };
        if let Some(module) = module(&path, &maps, Arc::new(map)) {
            known.push(module.avma_range());
            unwinder.add_module(module);
            added += 1;
        }
    }
    added
}

/// A file's program and section headers and its sections' names: what the
/// unwinder needs, not the symbol tables a full parse reads (tens of
/// megabytes of a large library's, at each attach).
struct Headers<'a> {
    program_headers: Vec<ProgramHeader>,
    section_headers: Vec<SectionHeader>,
    shdr_strtab: Strtab<'a>,
}

fn headers(bytes: &[u8]) -> Option<Headers<'_>> {
    let header = Elf::parse_header(bytes).ok()?;
    let ctx = Ctx::new(header.container().ok()?, header.endianness().ok()?);
    let count = |n: u16| usize::from(n);
    let offset = |o: u64| usize::try_from(o).ok();
    let program_headers =
        ProgramHeader::parse(bytes, offset(header.e_phoff)?, count(header.e_phnum), ctx).ok()?;
    let section_headers =
        SectionHeader::parse(bytes, offset(header.e_shoff)?, count(header.e_shnum), ctx).ok()?;
    let names = section_headers.get(count(header.e_shstrndx))?;
    let shdr_strtab =
        Strtab::parse(bytes, offset(names.sh_offset)?, offset(names.sh_size)?, 0).ok()?;
    Some(Headers {
        program_headers,
        section_headers,
        shdr_strtab,
    })
}

fn module(path: &str, maps: &[Mapping], map: Arc<Mmap>) -> Option<Module<Bytes>> {
    let elf = headers(&map)?;
    let first_load = elf.program_headers.iter().find(|h| h.p_type == PT_LOAD)?;
    let first_map = maps.iter().find(|m| m.offset == 0)?;
    // The load bias: where the file's first segment sits, less its
    // address in the file (0 for a shared object or a PIE executable).
    let base = first_map
        .start
        .checked_sub(first_load.p_vaddr & !(first_load.p_align.max(1) - 1))?;
    let avma = maps.iter().map(|m| m.start).min()?..maps.iter().map(|m| m.end).max()?;
    let section = |name: &str| {
        let sh = elf.section_headers.iter().find(|sh| {
            elf.shdr_strtab.get_at(sh.sh_name) == Some(name) && sh.sh_type != SHT_NOBITS
        })?;
        let start = usize::try_from(sh.sh_offset).ok()?;
        let end = start.checked_add(usize::try_from(sh.sh_size).ok()?)?;
        (end <= map.len()).then(|| {
            (
                sh.sh_addr..sh.sh_addr + sh.sh_size,
                Bytes {
                    map: Arc::clone(&map),
                    range: start..end,
                },
            )
        })
    };
    let text = section(".text");
    let eh_frame = section(".eh_frame");
    let eh_frame_hdr = section(".eh_frame_hdr");
    let info = ExplicitModuleSectionInfo {
        base_svma: 0,
        text_svma: text.as_ref().map(|(r, _)| r.clone()),
        text: text.map(|(_, b)| b),
        got_svma: section(".got").map(|(r, _)| r),
        eh_frame_svma: eh_frame.as_ref().map(|(r, _)| r.clone()),
        eh_frame: eh_frame.map(|(_, b)| b),
        eh_frame_hdr_svma: eh_frame_hdr.as_ref().map(|(r, _)| r.clone()),
        eh_frame_hdr: eh_frame_hdr.map(|(_, b)| b),
        debug_frame: section(".debug_frame").map(|(_, b)| b),
        stubs_svma: None,
        stub_helper_svma: None,
        unwind_info: None,
        text_segment_svma: None,
        text_segment: None,
    };
    Some(Module::new(path.to_owned(), avma, base, info))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_lines_name_their_files_ranges_and_offsets() {
        let maps = "\
55d0c0000000-55d0c01ba000 r--p 00000000 00:1f 123 /bin/svc
55d0c01bb000-55d0c04b5000 r-xp 001ba000 00:1f 123 /bin/svc
7ffd1000-7ffd2000 rw-p 00000000 00:00 0 [stack]
7f00aa000000-7f00aa001000 rw-p 00000000 00:00 0
";
        let m = parse_maps(maps);
        assert_eq!(m.len(), 2, "{m:?}");
        assert_eq!(m[1].offset, 0x1ba000);
        assert!(m[1].executable && !m[0].executable);
        assert_eq!(m[0].path, "/bin/svc");
    }

    #[test]
    fn this_process_s_own_binary_is_a_module_with_its_unwind_sections() {
        let me = std::process::id();
        let maps = std::fs::read_to_string(format!("/proc/{me}/maps")).unwrap();
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let exe = exe.to_string_lossy();
        let mine: Vec<Mapping> = parse_maps(&maps)
            .into_iter()
            .filter(|m| m.path == exe)
            .collect();
        let file = std::fs::File::open(&*exe).unwrap();
        // SAFETY: read-only map of this test's own executable.
        let map = Arc::new(unsafe { Mmap::map(&file) }.unwrap());
        let module = module(&exe, &mine, map).expect("the test binary is a module");
        // The function this test runs in lies inside it.
        let here =
            this_process_s_own_binary_is_a_module_with_its_unwind_sections as *const () as u64;
        let range = module.avma_range();
        assert!(range.contains(&here), "{range:x?} {here:x}");
    }
}
