//! DeltaFIFO and the in-order FIFO between a reflector and an informer: the Rust counterpart of client-go's DeltaFIFO and RealFIFO.
