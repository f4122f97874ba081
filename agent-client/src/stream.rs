//! Stream frames: closed unions of data and a **successful** control.
//! A control carrying an error never becomes a frame; the adapter turns it
//! into a typed [`crate::Error`] (for example [`crate::CursorGapError`]).

use crate::event::Event;
use crate::interaction::{InteractionSnapshot, InteractionUpdate};
use crate::values::ValueError;

/// The control that closes an event page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventControl {
    earliest: u64,
    latest: u64,
    last_delivered: u64,
    page_last: Option<u64>,
    has_more: bool,
    tailing: bool,
}

impl EventControl {
    /// The current form (with `page_last`), under the arithmetic of
    /// docs/protocol.md, "Streams": a valid or empty window; `earliest-1 <= page_last <=
    /// latest`; `earliest-1 <= last_delivered <= page_last`; `has_more ⇔
    /// page_last < latest`; not both `has_more` and `tailing`; `tailing ⇒
    /// page_last == latest`.
    pub fn new(
        earliest: u64,
        latest: u64,
        last_delivered: u64,
        page_last: u64,
        has_more: bool,
        tailing: bool,
    ) -> Result<Self, ValueError> {
        window(earliest, latest)?;
        let floor = earliest - 1;
        if !(floor..=latest).contains(&page_last) || !(floor..=page_last).contains(&last_delivered)
        {
            return Err(ValueError::new("page bounds lie outside the window"));
        }
        if has_more != (page_last < latest)
            || (has_more && tailing)
            || (tailing && page_last != latest)
        {
            return Err(ValueError::new("page flags are inconsistent"));
        }
        Ok(Self {
            earliest,
            latest,
            last_delivered,
            page_last: Some(page_last),
            has_more,
            tailing,
        })
    }

    /// The legacy form (no `page_last`, never more, never tailing):
    /// `last_delivered` lies in `[earliest-1, latest]`.
    pub fn legacy(earliest: u64, latest: u64, last_delivered: u64) -> Result<Self, ValueError> {
        window(earliest, latest)?;
        if !(earliest - 1..=latest).contains(&last_delivered) {
            return Err(ValueError::new("last delivered lies outside the window"));
        }
        Ok(Self {
            earliest,
            latest,
            last_delivered,
            page_last: None,
            has_more: false,
            tailing: false,
        })
    }
    /// Earliest retained sequence.
    pub fn earliest(&self) -> u64 {
        self.earliest
    }
    /// Latest sequence.
    pub fn latest(&self) -> u64 {
        self.latest
    }
    /// Last sequence this page delivered (or the cursor).
    pub fn last_delivered(&self) -> u64 {
        self.last_delivered
    }
    /// The page's end, in the current form.
    pub fn page_last(&self) -> Option<u64> {
        self.page_last
    }
    /// More events exist after the page.
    pub fn has_more(&self) -> bool {
        self.has_more
    }
    /// Live events follow.
    pub fn tailing(&self) -> bool {
        self.tailing
    }
}

fn window(earliest: u64, latest: u64) -> Result<(), ValueError> {
    let valid = earliest > 0 && latest >= earliest;
    let empty = earliest > 0 && latest < u64::MAX && earliest == latest + 1;
    if valid || empty {
        Ok(())
    } else {
        Err(ValueError::new("event window is neither valid nor empty"))
    }
}

/// The control that closes the interaction snapshot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InteractionControl {
    latest: u64,
    page_last: u64,
    has_more: bool,
    tailing: bool,
}

impl InteractionControl {
    /// `page_last <= latest`; `has_more ⇔ page_last < latest`; not both
    /// `has_more` and `tailing`; `tailing ⇒ page_last == latest`.
    pub fn new(
        latest: u64,
        page_last: u64,
        has_more: bool,
        tailing: bool,
    ) -> Result<Self, ValueError> {
        if page_last > latest
            || has_more != (page_last < latest)
            || (has_more && tailing)
            || (tailing && page_last != latest)
        {
            return Err(ValueError::new("interaction control is inconsistent"));
        }
        Ok(Self {
            latest,
            page_last,
            has_more,
            tailing,
        })
    }
    /// Latest revision.
    pub fn latest(&self) -> u64 {
        self.latest
    }
    /// The snapshot's revision.
    pub fn page_last(&self) -> u64 {
        self.page_last
    }
    /// More follows (never on a valid initial page).
    pub fn has_more(&self) -> bool {
        self.has_more
    }
    /// Deltas follow.
    pub fn tailing(&self) -> bool {
        self.tailing
    }
}

/// One frame of an event stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EventFrame {
    /// An event.
    Event(Event),
    /// The control that closed the initial page.
    Control(EventControl),
}

/// One frame of an interaction stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InteractionFrame {
    /// The complete pending set (first frame).
    Snapshot(InteractionSnapshot),
    /// The control after the snapshot.
    Control(InteractionControl),
    /// A change of the pending set (tail).
    Update(InteractionUpdate),
}
