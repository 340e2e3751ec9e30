/* placeholder: replaced by the C emitter's runtime header */
