//! Finding messages without receiving them: the peek with a filter, which the console's
//! search box and `/_sqsim/peek?q=…` use. A page is a bounded scan of the queue's stored
//! messages from an offset — at most [`Budget::messages`] messages and [`Budget::bytes`]
//! of bodies examined — so one request never holds a big queue's lock for long; the answer
//! says how far it got, and the next page goes on from there.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;

use super::attribute::AttributeData;
use super::message::{Delivery, Payload};
use super::view::PeekedMessage;

/// What a message must match: every part that is given; an empty filter matches all.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Filter {
    /// A substring of the body.
    pub text: Option<String>,
    /// A substring of the MessageId (its first characters are enough), in lower case, as
    /// MessageIds are written.
    pub id: Option<String>,
    /// A message attribute's name, and its value when given: a String or Number attribute's
    /// text, a Binary one's base64.
    pub attribute: Option<(String, Option<String>)>,
    /// The FIFO message group.
    pub group: Option<String>,
    /// Where the message is in its life.
    pub state: Option<State>,
}

/// A message's state as peek shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum State {
    Visible,
    InFlight,
    Delayed,
}

impl State {
    /// The state's name in peek's answers (`visible`, `in_flight`, `delayed`).
    pub(crate) fn parse(name: &str) -> Option<State> {
        match name {
            "visible" => Some(State::Visible),
            "in_flight" => Some(State::InFlight),
            "delayed" => Some(State::Delayed),
            _ => None,
        }
    }

    fn of(delivery: Delivery) -> State {
        match delivery {
            Delivery::Visible => State::Visible,
            Delivery::InFlight { .. } => State::InFlight,
            Delivery::Delayed { .. } => State::Delayed,
        }
    }
}

impl Filter {
    /// Whether nothing is asked: every message matches.
    pub(crate) fn is_empty(&self) -> bool {
        *self == Filter::default()
    }

    /// Whether the message matches; the cheap checks come first.
    pub(crate) fn matches(&self, payload: &Payload, delivery: Delivery) -> bool {
        if self.state.is_some_and(|s| s != State::of(delivery)) {
            return false;
        }
        if let Some(group) = &self.group {
            if payload.group_id.as_deref() != Some(group.as_str()) {
                return false;
            }
        }
        if let Some(id) = &self.id {
            // Written into a stack buffer: this runs for every message a page scans.
            let mut buf = uuid::Uuid::encode_buffer();
            if !payload
                .message_id
                .as_hyphenated()
                .encode_lower(&mut buf)
                .contains(id.as_str())
            {
                return false;
            }
        }
        if let Some((name, value)) = &self.attribute {
            let Some((_, v)) = payload.attributes().iter().find(|(n, _)| n == name) else {
                return false;
            };
            let equal = match (&v.data, value) {
                (_, None) => true,
                (AttributeData::String(s), Some(want)) => s == want,
                (AttributeData::Binary(b), Some(want)) => STANDARD.encode(b) == *want,
            };
            if !equal {
                return false;
            }
        }
        match &self.text {
            Some(text) => payload.body.contains(text.as_str()),
            None => true,
        }
    }
}

/// How much one page may look at and return.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Budget {
    /// Messages examined, at most.
    pub messages: usize,
    /// Body bytes examined, at most (at least one message is).
    pub bytes: u64,
    /// Messages returned, at most.
    pub page: usize,
    /// Bytes of returned messages (bodies, attributes, overhead), at most; at least one is.
    pub page_bytes: u64,
}

/// One page of a search.
#[derive(Debug)]
pub(crate) struct Found {
    pub messages: Vec<PeekedMessage>,
    /// Messages examined for this page.
    pub scanned: usize,
    /// Where the next page starts, if the scan stopped before the end of the queue.
    pub next: Option<usize>,
    /// Messages stored in all.
    pub total: usize,
}
