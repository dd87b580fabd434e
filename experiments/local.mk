# attnacc: build fragment of the attnacc command.
