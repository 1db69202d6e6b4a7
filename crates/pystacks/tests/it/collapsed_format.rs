//! The collapsed lines this crate writes are exactly what
//! `report::profile::parse_collapsed` reads back: same frames, same
//! counts, no problem lines, whatever the frame labels hold.

use proptest::prelude::*;
use pystacks::{CollapsedStack, Frame, collapsed_text};

fn frame() -> impl Strategy<Value = Frame> {
    // Names and files as Python allows them (any text but NUL), lines
    // from 0 (unknown) up.
    ("[^\u{0}]{1,20}", "[^\u{0}]{0,30}", 0u32..100_000).prop_map(|(name, file, line)| Frame {
        name,
        filename: format!("/abs/{file}"),
        short_filename: file,
        line,
    })
}

proptest! {
    #[test]
    fn what_is_written_is_read_back(
        stacks in prop::collection::vec(
            (prop::collection::vec(frame(), 1..8), 1u64..1_000_000),
            0..10,
        )
    ) {
        let stacks: Vec<CollapsedStack> = stacks
            .into_iter()
            .map(|(frames, samples)| CollapsedStack {
                frames: frames.iter().map(Frame::label).collect(),
                samples,
            })
            .collect();
        let text = collapsed_text(&stacks);
        let (read, problems) = report::profile::parse_collapsed(&text);
        prop_assert!(problems.is_empty(), "{problems:?}");
        prop_assert_eq!(read.len(), stacks.len());
        for (r, s) in read.iter().zip(&stacks) {
            prop_assert_eq!(&r.frames, &s.frames);
            prop_assert_eq!(r.samples, s.samples);
        }
    }
}
