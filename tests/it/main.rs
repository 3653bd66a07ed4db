//! sqsim's Rust integration tests, one crate (each test crate links aws-sdk-sqs, so one
//! crate instead of fourteen saves most of the link time on two cores). Each module is one
//! area; `common` starts servers and builds clients for all of them.

mod common;

mod abusive_clients;
mod auth;
mod config_file;
mod controls;
mod durable;
mod errors;
mod fifo;
mod file_circles;
mod golden;
mod malformed;
mod readme;
mod readme_example;
mod redrive;
mod reference_docs;
mod sdk;
mod shutdown;
mod unfinished_bodies;
mod visibility;
mod worker;
