//! The SQS actions, named once. A request's action is read off the wire into an [`Action`]
//! by the decoder; every later stage (dispatch, the cluster's shard decision, access
//! control, metrics) matches on the enum, so a misspelt name cannot compile and a metric
//! slot is an index, not a scan.

use crate::error::{ErrorCode, SqsError};

use super::Protocol;

/// Declares [`Action`] with its wire names, listed once.
macro_rules! actions {
    ($($name:ident),* $(,)?) => {
        /// One SQS action.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub(crate) enum Action {
            $(
                #[doc = concat!("`", stringify!($name), "`")]
                $name,
            )*
        }

        impl Action {
            /// Every action, in declaration order ([`Action::index`] is the position here).
            pub(crate) const ALL: &'static [Action] = &[$(Action::$name),*];
            /// Every action's wire name, in the same order.
            pub(crate) const NAMES: &'static [&'static str] = &[$(stringify!($name)),*];

            /// The action's wire name (`SendMessageBatch`).
            pub(crate) const fn name(self) -> &'static str {
                match self {
                    $(Action::$name => stringify!($name),)*
                }
            }

            /// The action a wire name names, if any (case matters, as it does to SQS).
            pub(crate) fn from_name(name: &str) -> Option<Action> {
                match name {
                    $(stringify!($name) => Some(Action::$name),)*
                    _ => None,
                }
            }
        }
    };
}

actions! {
    CreateQueue,
    GetQueueUrl,
    ListQueues,
    DeleteQueue,
    GetQueueAttributes,
    SetQueueAttributes,
    PurgeQueue,
    SendMessage,
    SendMessageBatch,
    ReceiveMessage,
    DeleteMessage,
    DeleteMessageBatch,
    ChangeMessageVisibility,
    ChangeMessageVisibilityBatch,
    TagQueue,
    UntagQueue,
    ListQueueTags,
    ListDeadLetterSourceQueues,
    StartMessageMoveTask,
    ListMessageMoveTasks,
    CancelMessageMoveTask,
    AddPermission,
    RemovePermission,
}

impl Action {
    /// How many actions there are.
    pub(crate) const COUNT: usize = Action::ALL.len();

    /// The action's position in [`Action::ALL`] (a metrics slot).
    pub(crate) const fn index(self) -> usize {
        self as usize
    }

    /// The action a wire name names, or the error SQS answers for a name it does not know
    /// (the query protocol names it; JSON answers a bare `UnknownOperationException`).
    pub(crate) fn parse(name: &str, protocol: Protocol) -> Result<Action, SqsError> {
        Action::from_name(name).ok_or_else(|| match protocol {
            Protocol::Query => SqsError::new(
                ErrorCode::InvalidAction,
                format!("The action {name} is not valid for this endpoint."),
            ),
            Protocol::Json => SqsError::new(ErrorCode::UnknownOperation, ""),
        })
    }
}

impl std::fmt::Display for Action {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_index_is_position() {
        assert_eq!(Action::COUNT, 23);
        for (i, a) in Action::ALL.iter().enumerate() {
            assert_eq!(a.index(), i);
            assert_eq!(Action::NAMES[i], a.name());
            assert_eq!(Action::from_name(a.name()), Some(*a));
        }
        assert_eq!(Action::from_name("sendmessage"), None);
        assert_eq!(Action::from_name(""), None);
    }

    #[test]
    fn unknown_names_get_each_protocols_error() {
        let q = Action::parse("Nope", Protocol::Query).unwrap_err();
        assert_eq!(q.code, ErrorCode::InvalidAction);
        assert_eq!(q.message, "The action Nope is not valid for this endpoint.");
        let j = Action::parse("Nope", Protocol::Json).unwrap_err();
        assert_eq!(j.code, ErrorCode::UnknownOperation);
    }
}
